//! An in-memory stand-in for the Kubernetes API server (placeholder; being built).
