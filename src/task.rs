//! Named, supervised tasks: none ends, fails or panics without the process knowing which.
//!
//! Every long-lived part of the manager runs as a task with a name in
//! a [`TaskSet`]: one that ends before it was asked to, fails, panics or is aborted is logged
//! by its name and reported as a [`TaskError`] naming it. Sets nest (the webhook's server and
//! certificate refresher, a controller and its workers), and every set lists its running tasks
//! in one [`Tasks`] directory, where each can be found by name (and ended: that is how the
//! tests show that the process notices any task's end).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::task::{AbortHandle, Id, JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

/// The directory of running tasks, by name; shared by every [`TaskSet`] of a process.
#[derive(Debug, Clone, Default)]
pub struct Tasks(Arc<Mutex<BTreeMap<&'static str, AbortHandle>>>);

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, AbortHandle>> {
        // A panic elsewhere while holding the lock leaves a valid map: keep using it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The names of the tasks running now.
    pub fn names(&self) -> Vec<&'static str> {
        self.lock().keys().copied().collect()
    }

    /// Abort the task `name`, if it runs: its set reports it as [`TaskError::Aborted`].
    pub fn abort(&self, name: &str) -> bool {
        match self.lock().get(name) {
            Some(handle) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    fn remove(&self, name: &'static str, id: Id) {
        let mut tasks = self.lock();
        if tasks.get(name).is_some_and(|h| h.id() == id) {
            tasks.remove(name);
        }
    }
}

/// Why a supervised task is a failure, by the task's name.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// It returned although nobody asked it to stop.
    #[error("the {0} stopped without being asked to")]
    Ended(&'static str),
    /// It panicked.
    #[error("the {task} panicked: {message}")]
    Panicked {
        /// The task.
        task: &'static str,
        /// The panic's message.
        message: String,
    },
    /// It was aborted from outside.
    #[error("the {0} was aborted")]
    Aborted(&'static str),
    /// It returned an error.
    #[error("the {task} failed")]
    Failed {
        /// The task.
        task: &'static str,
        /// Its error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl TaskError {
    /// The name of the task.
    pub fn task(&self) -> &'static str {
        match self {
            TaskError::Ended(task) | TaskError::Aborted(task) => task,
            TaskError::Panicked { task, .. } | TaskError::Failed { task, .. } => task,
        }
    }
}

/// How a task ended when that is a failure.
#[derive(Debug)]
pub enum Exit<E> {
    /// It returned this error.
    Failed(E),
    /// It returned before its set was asked to stop.
    Ended,
    /// It panicked, with this message.
    Panicked(String),
    /// It was aborted from outside.
    Aborted,
}

impl<E: std::error::Error + Send + Sync + 'static> Exit<E> {
    /// The error naming `task`.
    pub fn into_error(self, task: &'static str) -> TaskError {
        match self {
            Exit::Failed(e) => TaskError::Failed {
                task,
                source: Box::new(e),
            },
            Exit::Ended => TaskError::Ended(task),
            Exit::Panicked(message) => TaskError::Panicked { task, message },
            Exit::Aborted => TaskError::Aborted(task),
        }
    }
}

/// Tasks spawned together and watched together. A task's end is clean only when it returns
/// `Ok(())` after `stop` was cancelled; dropping the set aborts the tasks still running.
#[derive(Debug)]
pub struct TaskSet<E> {
    set: JoinSet<Result<(), E>>,
    names: HashMap<Id, &'static str>,
    tasks: Tasks,
    stop: CancellationToken,
}

impl<E> TaskSet<E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    /// An empty set listing its tasks in `tasks`; `stop` asks its tasks to stop.
    pub fn new(tasks: &Tasks, stop: CancellationToken) -> Self {
        Self {
            set: JoinSet::new(),
            names: HashMap::new(),
            tasks: tasks.clone(),
            stop,
        }
    }

    /// Run `task` as `name`.
    pub fn spawn(
        &mut self,
        name: &'static str,
        task: impl Future<Output = Result<(), E>> + Send + 'static,
    ) {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
        self.tasks.lock().insert(name, handle);
    }

    /// The token that asks this set's tasks to stop.
    pub fn stop(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Whether no task is left.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The next task to end, by name, and whether its end is a failure (which is logged).
    pub async fn join_next(&mut self) -> Option<(&'static str, Result<(), Exit<E>>)> {
        let (id, exit) = match self.set.join_next_with_id().await? {
            Ok((id, Ok(()))) if self.stop.is_cancelled() => (id, Ok(())),
            Ok((id, Ok(()))) => (id, Err(Exit::Ended)),
            Ok((id, Err(e))) => (id, Err(Exit::Failed(e))),
            Err(e) => (e.id(), Err(joined(e))),
        };
        let name = self.names.remove(&id).unwrap_or("task");
        self.tasks.remove(name, id);
        if let Err(exit) = &exit {
            let error = match exit {
                Exit::Failed(e) => crate::telemetry::error_chain(e),
                Exit::Ended => "stopped without being asked to".into(),
                Exit::Panicked(message) => format!("panicked: {message}"),
                Exit::Aborted => "aborted".into(),
            };
            tracing::error!(task = name, %error, "task ended");
        }
        Some((name, exit))
    }

    /// Wait until every task has ended cleanly; the first failure is returned at once (the
    /// tasks still running are aborted with the set).
    pub async fn supervise(mut self) -> Result<(), TaskError> {
        while let Some((name, exit)) = self.join_next().await {
            exit.map_err(|exit| exit.into_error(name))?;
        }
        Ok(())
    }
}

impl<E> Drop for TaskSet<E> {
    fn drop(&mut self) {
        for (id, name) in self.names.drain() {
            self.tasks.remove(name, id);
        }
    }
}

/// What a task that did not return says: its panic, or that it was aborted.
fn joined<E>(error: JoinError) -> Exit<E> {
    if !error.is_panic() {
        return Exit::Aborted;
    }
    let panic = error.into_panic();
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a value that is not text".into());
    Exit::Panicked(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[derive(Debug, thiserror::Error)]
    #[error("boom")]
    struct Boom;

    async fn forever() -> Result<(), Boom> {
        futures::future::pending::<()>().await;
        Ok(())
    }

    #[tokio::test]
    async fn every_way_to_end_is_named() {
        let tasks = Tasks::default();
        let stop = CancellationToken::new();
        let mut set = TaskSet::<Boom>::new(&tasks, stop.clone());
        set.spawn("quitter", async { Ok(()) });
        set.spawn("failer", async { Err(Boom) });
        set.spawn("panicker", async {
            if true {
                panic!("at the disco");
            }
            Ok(())
        });
        set.spawn("sleeper", forever());
        tokio::task::yield_now().await;
        let mut ended = Vec::new();
        for _ in 0..3 {
            let (name, exit) = set.join_next().await.expect("a task ended");
            let error = exit.expect_err("a failure").into_error(name);
            ended.push((name, error.to_string()));
        }
        ended.sort();
        assert_eq!(
            ended,
            [
                ("failer", "the failer failed".to_string()),
                (
                    "panicker",
                    "the panicker panicked: at the disco".to_string()
                ),
                (
                    "quitter",
                    "the quitter stopped without being asked to".to_string()
                ),
            ]
        );
        assert_eq!(tasks.names(), ["sleeper"]);
        assert!(tasks.abort("sleeper"));
        assert!(!tasks.abort("nobody"));
        let (name, exit) = set.join_next().await.expect("aborted");
        assert_eq!(name, "sleeper");
        assert!(matches!(exit, Err(Exit::Aborted)), "{exit:?}");
        assert!(tasks.names().is_empty());
    }

    #[tokio::test]
    async fn a_task_that_stops_when_asked_is_clean_and_a_dropped_set_leaves_the_directory() {
        let tasks = Tasks::default();
        let stop = CancellationToken::new();
        let mut set = TaskSet::<Boom>::new(&tasks, stop.clone());
        let asked = stop.clone();
        set.spawn("polite", async move {
            asked.cancelled().await;
            Ok(())
        });
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), set.supervise())
            .await
            .expect("ends")
            .expect("clean");
        let mut set = TaskSet::<Boom>::new(&tasks, CancellationToken::new());
        set.spawn("inner", forever());
        assert_eq!(tasks.names(), ["inner"]);
        drop(set);
        assert!(tasks.names().is_empty());
    }

    #[tokio::test]
    async fn supervise_returns_the_first_failure_by_name() {
        let tasks = Tasks::default();
        let mut set = TaskSet::<Boom>::new(&tasks, CancellationToken::new());
        set.spawn("sleeper", forever());
        set.spawn("failer", async { Err(Boom) });
        let error = set.supervise().await.expect_err("failed");
        assert_eq!(error.task(), "failer");
        assert!(tasks.names().is_empty(), "{:?}", tasks.names());
    }
}
