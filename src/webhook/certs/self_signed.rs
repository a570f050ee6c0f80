//! Self-provisioned certificates (`--webhook-self-signed`), for clusters without cert-manager.
//!
//! A Secret is the source of truth, so every replica serves the same pair: the first replica
//! creates it (a creation conflict means another replica won, and its Secret is used), later
//! ones read it. It holds a CA (10 years) and a serving certificate signed by it (1 year) for
//! the Service's DNS names. The serving certificate is re-issued 30 days before expiry with the
//! same CA, so the `caBundle` does not change; the CA is replaced 60 days before its own
//! expiry, and the bundle then carries the new and the old CA so that replicas still serving
//! the old pair stay trusted. The `caBundle` of the two webhook configurations (by default
//! [`MUTATING_CONFIG`] and [`VALIDATING_CONFIG`]) is kept equal to the Secret's `ca.crt`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use jiff::{Timestamp, ToSpan};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::CertError;
use crate::clock::Clock;
use crate::webhook::tls;

/// Default name of our MutatingWebhookConfiguration (`--webhook-mutating-configuration`).
pub const MUTATING_CONFIG: &str = "kronjob-mutating";
/// Default name of our ValidatingWebhookConfiguration (`--webhook-validating-configuration`).
pub const VALIDATING_CONFIG: &str = "kronjob-validating";
/// How often the Secret and the caBundles are checked.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(300);
/// Lifetime of the CA, in days.
pub const CA_DAYS: i64 = 3650;
/// Lifetime of the serving certificate, in days.
pub const LEAF_DAYS: i64 = 365;
/// The serving certificate is re-issued when it has fewer days left than this.
pub const LEAF_RENEW_DAYS: i64 = 30;
/// The CA is replaced when it has fewer days left than this.
pub const CA_RENEW_DAYS: i64 = 60;

const CA_COMMON_NAME: &str = "kronjob-webhook-ca";
const ANNOTATION_NOT_AFTER: &str = "batch.kronjob.dev/not-after";
const ANNOTATION_CA_NOT_AFTER: &str = "batch.kronjob.dev/ca-not-after";
const CONFLICT_RETRIES: usize = 5;

/// A CA and a serving certificate, as PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The CA certificate that signs the serving certificate.
    pub ca_cert_pem: String,
    /// The CA's private key.
    pub ca_key_pem: String,
    /// What clients must trust: the CA, followed by the previous CA during a CA rotation.
    pub ca_bundle_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
    /// Expiry of the serving certificate.
    pub not_after: Timestamp,
    /// Expiry of the CA.
    pub ca_not_after: Timestamp,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys are never printed.
        f.debug_struct("Bundle")
            .field("not_after", &self.not_after)
            .field("ca_not_after", &self.ca_not_after)
            .finish_non_exhaustive()
    }
}

/// The DNS names a serving certificate for `service` in `namespace` carries.
pub fn dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_string(),
    ]
}

/// Midnight UTC `days` after (or before, if negative) the day of `now`.
fn day(now: Timestamp, days: i64) -> Result<(Timestamp, jiff::civil::Date), CertError> {
    let date = now
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .checked_add(days.days())?;
    let ts = date.to_zoned(jiff::tz::TimeZone::UTC)?.timestamp();
    Ok((ts, date))
}

/// The date as rcgen wants it. Month and day are in 1..=12 and 1..=31, so the casts are
/// lossless.
macro_rules! ymd {
    ($date:expr) => {{
        let d: jiff::civil::Date = $date;
        rcgen::date_time_ymd(i32::from(d.year()), d.month() as u8, d.day() as u8)
    }};
}

fn ca_params(now: Timestamp) -> Result<(CertificateParams, Timestamp), CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = ymd!(day(now, -1)?.1);
    let (not_after, rc) = day(now, CA_DAYS)?;
    params.not_after = ymd!(rc);
    Ok((params, not_after))
}

/// Issue a new CA: (certificate PEM, key PEM, expiry).
pub fn issue_ca(now: Timestamp) -> Result<(String, String, Timestamp), CertError> {
    let key = KeyPair::generate()?;
    let (params, not_after) = ca_params(now)?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem(), not_after))
}

/// Issue a serving certificate for `names`, signed by the CA whose key is `ca_key_pem`:
/// (certificate PEM, key PEM, expiry). The CA's subject is rebuilt from the same parameters
/// [`issue_ca`] used, so the chain verifies against the stored CA certificate.
pub fn issue_leaf(
    ca_key_pem: &str,
    names: &[String],
    now: Timestamp,
) -> Result<(String, String, Timestamp), CertError> {
    let ca_key = KeyPair::from_pem(ca_key_pem)?;
    let (ca_params, _) = ca_params(now)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    if let Some(first) = names.first() {
        params.distinguished_name.push(DnType::CommonName, first);
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = ymd!(day(now, -1)?.1);
    let (not_after, rc) = day(now, LEAF_DAYS)?;
    params.not_after = ymd!(rc);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem(), not_after))
}

/// A fresh bundle: new CA, new serving certificate.
pub fn issue_bundle(names: &[String], now: Timestamp) -> Result<Bundle, CertError> {
    let (ca_cert_pem, ca_key_pem, ca_not_after) = issue_ca(now)?;
    let (cert_pem, key_pem, not_after) = issue_leaf(&ca_key_pem, names, now)?;
    Ok(Bundle {
        ca_bundle_pem: ca_cert_pem.clone(),
        ca_cert_pem,
        ca_key_pem,
        cert_pem,
        key_pem,
        not_after,
        ca_not_after,
    })
}

/// What `bundle` needs at `now`: nothing (`None`), or the bundle to store instead.
pub fn renew(
    bundle: &Bundle,
    names: &[String],
    now: Timestamp,
) -> Result<Option<Bundle>, CertError> {
    let days_left = |t: Timestamp| t.duration_since(now).as_secs() / 86_400;
    if days_left(bundle.ca_not_after) < CA_RENEW_DAYS {
        let mut fresh = issue_bundle(names, now)?;
        if bundle.ca_not_after > now {
            // Trust both until every replica serves the new pair.
            fresh.ca_bundle_pem = format!("{}{}", fresh.ca_cert_pem, bundle.ca_cert_pem);
        }
        return Ok(Some(fresh));
    }
    if days_left(bundle.not_after) < LEAF_RENEW_DAYS {
        let (cert_pem, key_pem, not_after) = issue_leaf(&bundle.ca_key_pem, names, now)?;
        return Ok(Some(Bundle {
            ca_bundle_pem: bundle.ca_cert_pem.clone(),
            cert_pem,
            key_pem,
            not_after,
            ..bundle.clone()
        }));
    }
    Ok(None)
}

fn to_secret(
    bundle: &Bundle,
    name: &str,
    namespace: &str,
    resource_version: Option<String>,
) -> Secret {
    let data = [
        ("tls.crt", &bundle.cert_pem),
        ("tls.key", &bundle.key_pem),
        ("ca.crt", &bundle.ca_bundle_pem),
        ("ca-cert.pem", &bundle.ca_cert_pem),
        ("ca-key.pem", &bundle.ca_key_pem),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            resource_version,
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "kronjob".to_string(),
            )])),
            annotations: Some(BTreeMap::from([
                (
                    ANNOTATION_NOT_AFTER.to_string(),
                    bundle.not_after.to_string(),
                ),
                (
                    ANNOTATION_CA_NOT_AFTER.to_string(),
                    bundle.ca_not_after.to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(data),
        ..Secret::default()
    }
}

/// The bundle stored in `secret`, or `None` when anything is missing or unreadable (it is
/// then replaced).
fn from_secret(secret: &Secret) -> Option<Bundle> {
    let data = secret.data.as_ref()?;
    let text = |k: &str| {
        data.get(k)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    let annotations = secret.metadata.annotations.as_ref()?;
    let time = |k: &str| annotations.get(k).and_then(|v| v.parse::<Timestamp>().ok());
    let bundle = Bundle {
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        ca_bundle_pem: text("ca.crt")?,
        ca_cert_pem: text("ca-cert.pem")?,
        ca_key_pem: text("ca-key.pem")?,
        not_after: time(ANNOTATION_NOT_AFTER)?,
        ca_not_after: time(ANNOTATION_CA_NOT_AFTER)?,
    };
    // Only a pair rustls accepts counts.
    tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()).ok()?;
    Some(bundle)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The self-provisioning state: where the Secret lives and what the certificate is for.
#[derive(Clone)]
pub struct SelfSigned {
    client: Client,
    namespace: String,
    secret: String,
    names: Vec<String>,
    mutating: String,
    validating: String,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfSigned")
            .field("namespace", &self.namespace)
            .field("secret", &self.secret)
            .field("names", &self.names)
            .field("mutating", &self.mutating)
            .field("validating", &self.validating)
            .finish_non_exhaustive()
    }
}

impl SelfSigned {
    /// Provision for `service` in `namespace`; the Secret is `<service>-self-signed`.
    pub fn new(client: Client, service: &str, namespace: &str) -> Self {
        SelfSigned {
            client,
            namespace: namespace.to_string(),
            secret: format!("{service}-self-signed"),
            names: dns_names(service, namespace),
            mutating: MUTATING_CONFIG.to_string(),
            validating: VALIDATING_CONFIG.to_string(),
        }
    }

    /// Keep the caBundle of these webhook configurations current instead of
    /// [`MUTATING_CONFIG`] and [`VALIDATING_CONFIG`] (each release names its own).
    pub fn with_configurations(mut self, mutating: &str, validating: &str) -> Self {
        self.mutating = mutating.to_string();
        self.validating = validating.to_string();
        self
    }

    /// Get or create the Secret, renew what is due, and bring the caBundles up to date.
    pub async fn ensure(&self, now: Timestamp) -> Result<Bundle, CertError> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut bundle = None;
        for _ in 0..CONFLICT_RETRIES {
            let existing = secrets.get_opt(&self.secret).await?;
            let (current, version) = match &existing {
                Some(s) => (from_secret(s), s.metadata.resource_version.clone()),
                None => (None, None),
            };
            let wanted = match &current {
                Some(b) => renew(b, &self.names, now)?,
                None => Some(issue_bundle(&self.names, now)?),
            };
            let Some(wanted) = wanted else {
                bundle = current;
                break;
            };
            let secret = to_secret(&wanted, &self.secret, &self.namespace, version);
            let written = if existing.is_some() {
                secrets
                    .replace(&self.secret, &PostParams::default(), &secret)
                    .await
            } else {
                secrets.create(&PostParams::default(), &secret).await
            };
            match written {
                Ok(_) => {
                    tracing::info!(secret = %self.secret, not_after = %wanted.not_after, "webhook certificate issued");
                    bundle = Some(wanted);
                    break;
                }
                // Another replica wrote first: read what it wrote.
                Err(e) if is_conflict(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let bundle = bundle.ok_or(CertError::Conflict)?;
        self.sync_ca_bundles(&bundle.ca_bundle_pem).await?;
        Ok(bundle)
    }

    /// Set the caBundle of every webhook of our two configurations to `ca_pem` (no write when
    /// it is already equal; a missing configuration is logged and skipped).
    pub async fn sync_ca_bundles(&self, ca_pem: &str) -> Result<(), CertError> {
        let want = ByteString(ca_pem.as_bytes().to_vec());
        sync_ca_bundle(
            &Api::<MutatingWebhookConfiguration>::all(self.client.clone()),
            &self.mutating,
            &want,
            mutating_clients,
        )
        .await?;
        sync_ca_bundle(
            &Api::<ValidatingWebhookConfiguration>::all(self.client.clone()),
            &self.validating,
            &want,
            validating_clients,
        )
        .await
    }
}

fn mutating_clients(c: &mut MutatingWebhookConfiguration) -> Vec<&mut WebhookClientConfig> {
    c.webhooks
        .iter_mut()
        .flatten()
        .map(|w| &mut w.client_config)
        .collect()
}

fn validating_clients(c: &mut ValidatingWebhookConfiguration) -> Vec<&mut WebhookClientConfig> {
    c.webhooks
        .iter_mut()
        .flatten()
        .map(|w| &mut w.client_config)
        .collect()
}

/// Set the caBundle of every webhook of configuration `name` to `want`, writing only when
/// something changed; a missing configuration is logged and skipped.
async fn sync_ca_bundle<K>(
    api: &Api<K>,
    name: &str,
    want: &ByteString,
    clients: fn(&mut K) -> Vec<&mut WebhookClientConfig>,
) -> Result<(), CertError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let Some(mut config) = api.get_opt(name).await? else {
        tracing::warn!(config = name, "webhook configuration not found");
        return Ok(());
    };
    let mut changed = false;
    for client in clients(&mut config) {
        if client.ca_bundle.as_ref() != Some(want) {
            client.ca_bundle = Some(want.clone());
            changed = true;
        }
    }
    if changed {
        api.replace(name, &PostParams::default(), &config).await?;
        tracing::info!(config = name, "caBundle updated");
    }
    Ok(())
}

/// Every `every`, re-run [`SelfSigned::ensure`] and serve the new pair when it changed
/// (renewed here or by another replica). Failures are logged; the current pair stays. Runs
/// until dropped.
pub async fn keep_fresh(
    provisioner: SelfSigned,
    clock: Arc<dyn Clock>,
    config: RustlsConfig,
    mut current: Bundle,
    every: Duration,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        match provisioner.ensure(clock.now()).await {
            Ok(bundle) if bundle.cert_pem != current.cert_pem => {
                match tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()) {
                    Ok(new) => {
                        config.reload_from_config(new);
                        tracing::info!(not_after = %bundle.not_after, "webhook certificate rotated");
                        current = bundle;
                    }
                    Err(e) => tracing::error!(error = %e, "rotated certificate is unusable"),
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "webhook certificate check failed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_renews_with_the_same_ca_and_ca_rotation_keeps_the_old_ca() {
        let names = dns_names("kronjob-webhook", "kronjob-system");
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
        let b = issue_bundle(&names, now).expect("issue");
        assert!(renew(&b, &names, now).expect("renew").is_none());
        let later = b.not_after - jiff::SignedDuration::from_hours(24 * 10);
        let r = renew(&b, &names, later).expect("renew").expect("leaf due");
        assert_eq!(r.ca_cert_pem, b.ca_cert_pem);
        assert_ne!(r.cert_pem, b.cert_pem);
        let much_later = b.ca_not_after - jiff::SignedDuration::from_hours(24 * 10);
        let r = renew(&b, &names, much_later)
            .expect("renew")
            .expect("CA due");
        assert_ne!(r.ca_cert_pem, b.ca_cert_pem);
        assert!(r.ca_bundle_pem.contains(&b.ca_cert_pem));
        let secret = to_secret(&r, "s", "ns", None);
        assert_eq!(from_secret(&secret), Some(r));
    }
}
