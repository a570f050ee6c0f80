//! The CronJob CRD at start: applied (server-side) with `--install-crd`, otherwise required.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use tracing::info;

use super::{FIELD_MANAGER, ManagerError};
use crate::api::CRD_NAME;

/// How long an applied CRD may take to become established.
const ESTABLISH_LIMIT: Duration = Duration::from_secs(30);

/// Make sure the CRD is there: apply it (server-side, as `kronjob`) when `install` is set and
/// wait until it is established; otherwise check that it exists.
pub async fn ensure_crd(client: Client, install: bool) -> Result<(), ManagerError> {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    if !install {
        return match api.get_opt(CRD_NAME).await.map_err(ManagerError::Crd)? {
            Some(_) => Ok(()),
            None => Err(ManagerError::CrdMissing),
        };
    }
    let crd = crate::api::crdgen::crd().map_err(ManagerError::CrdGen)?;
    api.patch(
        CRD_NAME,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(ManagerError::Crd)?;
    info!(crd = CRD_NAME, "CRD applied");
    tokio::time::timeout(
        ESTABLISH_LIMIT,
        await_condition(api, CRD_NAME, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| ManagerError::CrdNotEstablished(ESTABLISH_LIMIT))?
    .map_err(|e| ManagerError::Crd(kube::Error::Service(Box::new(e))))?;
    Ok(())
}
