//! Test support shared by the library's unit tests, the integration tests, the benches and the
//! load tools (each includes this file with `#[path]`; inside the library, `kronjob::` names the
//! crate itself): fixtures that read as prose, and the scripted mock API server.

// Every crate that includes this module uses a different part of it.
#![allow(dead_code)]

pub mod access;
pub mod admission;
pub mod api_script;
pub mod fixtures;
pub mod http;
pub mod manager;
pub mod sim;
pub mod upstream;
