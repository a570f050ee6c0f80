//! The kind of workload a CronJob runs, as a reconcile finds it: ready to use (its API and,
//! for a kind without a rule, the CronJob's own completion rule, compiled once per text), not
//! ready yet (its watch is listing), or why the CronJob cannot run it.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::context::Context;
use super::plan::Readiness;
use super::plan::scheduling::workload_problem;
use super::status::reason;
use crate::api::{CompletionRule, CronJob};
use crate::controller::workloads::{Availability, Resolved};
use crate::workload::cel::Completion;
use crate::workload::{kinds, type_of};

/// Compiled completion rules kept (distinct texts; CronJobs of one team often share one).
const COMPILED: usize = 256;

/// What a reconcile found of the CronJob's workload kind.
#[derive(Debug)]
pub enum Found {
    /// Workloads of it can be created and read; a kind without a rule comes with the CronJob's
    /// completion rule.
    Ready {
        /// The kind, as served.
        kind: Arc<Resolved>,
        /// The completion rule, for a kind without a rule of kronjob's.
        completion: Option<Arc<Completion>>,
    },
    /// Its watch is starting: look again shortly.
    Pending,
    /// It cannot be run: the `Ready` condition saying why.
    Blocked(Readiness),
}

/// Compiled completion rules, by their text.
#[derive(Debug)]
pub struct Completions(Mutex<LruCache<CompletionRule, Arc<Completion>>>);

impl Default for Completions {
    fn default() -> Self {
        Completions(Mutex::new(LruCache::new(
            NonZeroUsize::new(COMPILED).unwrap_or(NonZeroUsize::MIN),
        )))
    }
}

impl Completions {
    /// `rule`, compiled; the refusal names the expression (`succeeded` or `failed`).
    fn get(&self, rule: &CompletionRule) -> Result<Arc<Completion>, String> {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(compiled) = cache.get(rule) {
            return Ok(Arc::clone(compiled));
        }
        let compiled = Completion::compile(&rule.succeeded, &rule.failed)
            .map(Arc::new)
            .map_err(|(field, e)| format!("spec.completion.{field} {e}"))?;
        cache.put(rule.clone(), Arc::clone(&compiled));
        Ok(compiled)
    }
}

/// Find the kind `cj` runs, and its completion rule.
pub fn find(ctx: &Context, cj: &CronJob) -> Found {
    let invalid =
        |message: String| Found::Blocked(workload_problem(reason::INVALID_WORKLOAD, message));
    let Some(type_) = type_of(&cj.spec) else {
        return invalid("one of spec.jobTemplate and spec.workloadTemplate is required".into());
    };
    let known = kinds::known(type_.group(), &type_.kind).is_some();
    let completion = match (&cj.spec.completion, known) {
        (None, true) => None,
        (Some(rule), false) => match ctx.completions.get(rule) {
            Ok(compiled) => Some(compiled),
            Err(message) => return invalid(message),
        },
        (Some(_), true) => {
            return invalid(format!(
                "spec.completion: kronjob knows when a {} finished; remove spec.completion",
                type_.kind
            ));
        }
        (None, false) => {
            return invalid(format!(
                "kronjob has no rule for {} {}: spec.completion must say when a run succeeded and when it failed",
                type_.api_version, type_.kind
            ));
        }
    };
    match ctx.workloads.availability(&type_) {
        Availability::Ready(kind) => Found::Ready { kind, completion },
        Availability::Pending => Found::Pending,
        Availability::Unavailable(problem) => {
            Found::Blocked(workload_problem(problem.reason, problem.message))
        }
    }
}
