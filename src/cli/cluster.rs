//! What the commands that talk to the cluster share: kubectl's connection flags, the client
//! (with the manager's retry policy), the namespace scope, and how API errors read.

use std::path::PathBuf;

use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::CliError;
use crate::client::{ClientOptions, client_with};

/// kubectl's connection flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KubeArgs {
    /// Path to the kubeconfig file (default: KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the namespace of the kubeconfig context).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
}

impl KubeArgs {
    /// A client for the chosen kubeconfig and context (or the in-cluster service account).
    pub async fn client(&self) -> Result<Client, CliError> {
        let options = ClientOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            ..ClientOptions::default()
        };
        Ok(client_with(&options).await?)
    }

    /// `-n`, else the context's namespace.
    pub fn namespace(&self, client: &Client) -> String {
        self.namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string())
    }

    /// One namespace, or all of them with `-A`.
    pub fn scope(&self, client: &Client, all_namespaces: bool) -> Scope {
        if all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(self.namespace(client))
        }
    }
}

/// The namespaces a command reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One namespace.
    Namespace(String),
    /// Every namespace (`-A`).
    All,
}

impl Scope {
    /// A typed API over the scope.
    pub fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
        K: Clone + DeserializeOwned + std::fmt::Debug,
    {
        match self {
            Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
            Scope::All => Api::all(client.clone()),
        }
    }

    /// An untyped API over the scope, for objects read as JSON.
    pub fn dynamic(&self, client: &Client, resource: &ApiResource) -> Api<DynamicObject> {
        match self {
            Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, resource),
            Scope::All => Api::all_with(client.clone(), resource),
        }
    }

    /// kubectl's words when nothing was found: `No resources found in ns namespace.`
    pub fn nothing_found(&self) -> String {
        match self {
            Scope::Namespace(ns) => format!("No resources found in {ns} namespace."),
            Scope::All => "No resources found".into(),
        }
    }
}

/// An API error as kubectl shows it: the server's message (`cronjobs.batch.kronjob.dev "x" not
/// found`), else the whole error chain.
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => crate::command::message(other),
    }
}

/// Whether an API error says the object does not exist.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

/// The error of listing kronjob CronJobs: a 404 there means the resource type is unknown, so
/// say which CRD is missing.
pub fn listing_error(error: kube::Error) -> CliError {
    if is_not_found(&error) {
        CliError::Failed(format!(
            "the CronJob CRD ({}) is not installed in this cluster: kubectl apply -f crd/",
            crate::api::CRD_NAME
        ))
    } else {
        CliError::Api(error)
    }
}
