//! The CronJob CRD at start: applied (server-side) with `--install-crd`, otherwise required;
//! either way the manager starts only once the CRD is Established (the API server serves
//! CronJobs), so no probe, watch or webhook answer comes before that.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{Condition, await_condition, conditions};
use tracing::info;

use super::{FIELD_MANAGER, ManagerError};
use crate::api::{CALENDAR_CRD_NAME, CRD_NAME};

/// How long the CRD may take to become established.
pub const ESTABLISH_LIMIT: Duration = Duration::from_secs(30);

/// Make sure the CRD is there and Established: apply it (server-side, as `kronjob`) when
/// `install` is set; otherwise it must exist. Then wait until it is established.
pub async fn ensure_crd(client: Client, install: bool) -> Result<(), ManagerError> {
    ensure_crd_within(client, install, ESTABLISH_LIMIT).await
}

/// [`ensure_crd`], waiting at most `limit` for the CRD to become established.
pub async fn ensure_crd_within(
    client: Client,
    install: bool,
    limit: Duration,
) -> Result<(), ManagerError> {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    if install {
        // The Calendar CRD first: the CronJob CRD's establishment is what is waited for.
        let calendars = crate::api::crdgen::calendar_crd().map_err(ManagerError::CrdGen)?;
        api.patch(
            CALENDAR_CRD_NAME,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&calendars),
        )
        .await
        .map_err(ManagerError::Crd)?;
        info!(crd = CALENDAR_CRD_NAME, "CRD applied");
        let crd = crate::api::crdgen::crd().map_err(ManagerError::CrdGen)?;
        api.patch(
            CRD_NAME,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(ManagerError::Crd)?;
        info!(crd = CRD_NAME, "CRD applied");
    } else {
        let found = api.get_opt(CRD_NAME).await.map_err(ManagerError::Crd)?;
        match found {
            None => return Err(ManagerError::CrdMissing),
            Some(crd) if conditions::is_crd_established().matches_object(Some(&crd)) => {
                return Ok(());
            }
            Some(_) => info!(crd = CRD_NAME, "waiting for the CRD to be established"),
        }
    }
    tokio::time::timeout(
        limit,
        await_condition(api, CRD_NAME, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| ManagerError::CrdNotEstablished(limit))?
    .map_err(|e| ManagerError::Crd(kube::Error::Service(Box::new(e))))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kronjob_apisim::{ApiSim, CostModel};
    use serde_json::json;

    fn crd(established: Option<&str>) -> serde_json::Value {
        let mut crd = serde_json::to_value(crate::api::crdgen::crd().expect("crd")).expect("json");
        if let Some(status) = established {
            crd["status"] = json!({"conditions": [
                {"type": "Established", "status": status, "reason": "Test", "message": "",
                 "lastTransitionTime": "2024-01-01T00:00:00Z"}]});
        }
        crd
    }

    #[tokio::test]
    async fn without_install_the_crd_must_exist_and_be_established() {
        let limit = Duration::from_millis(300);
        let missing = ApiSim::new(CostModel::free());
        let error = ensure_crd_within(missing.client(), false, limit).await;
        assert!(matches!(error, Err(ManagerError::CrdMissing)), "{error:?}");

        let pending = ApiSim::new(CostModel::free());
        pending.insert(crd(Some("False")));
        let error = ensure_crd_within(pending.client(), false, limit).await;
        assert!(
            matches!(error, Err(ManagerError::CrdNotEstablished(_))),
            "{error:?}"
        );

        let ready = ApiSim::new(CostModel::free());
        ready.insert(crd(Some("True")));
        let result = ensure_crd_within(ready.client(), false, limit).await;
        assert!(result.is_ok(), "{result:?}");
        // What every install path's manager does at start (the RBAC check reads the log).
        crate::testing::sim::record_calls(&ready);
    }

    #[tokio::test]
    async fn with_install_the_crd_is_applied_and_waited_for() {
        let sim = ApiSim::new(CostModel::free());
        let result = ensure_crd_within(sim.client(), true, Duration::from_secs(5)).await;
        assert!(result.is_ok(), "{result:?}");
        let stored = sim.list(&kronjob_apisim::Resource::crds(), None);
        assert_eq!(stored.len(), 2, "the CronJob and the Calendar CRDs");
    }
}
