//! What a release ships, checked before it is made:
//! - installs: two installs of the chart or of kustomize coexist;
//! - chart: the chart's values schema refuses wrong values, naming the field, and accepts the
//!   defaults and every documented example; its ArtifactHub metadata matches the chart;
//! - sbom: the SBOMs of the binaries list every crate they link, and nothing a build does not
//!   compile;
//! - provenance: the provenance statement names each released file by its digest and the
//!   source it was built from.
//!
//! The tools come from `.tools/bin` (./scripts/install-tools.sh): helm, cargo-cyclonedx.

#[path = "../support/tools.rs"]
mod tools;

mod chart;
mod installs;
mod provenance;
mod sbom;
