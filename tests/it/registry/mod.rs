//! Registries: push and pull against a real Distribution registry, copy,
//! sign-in (login, htpasswd, bearer tokens), TLS, manifest lists, faults
//! from a proxy or a scripted server, limits, secrets kept out of every
//! output, and what a small copy touches.

mod auth;
mod cli;
mod copy;
mod e2e;
mod faults;
mod harness;
mod limits;
mod login;
mod manifest;
mod proxy_faults;
mod publish;
mod push;
mod secrets;
mod small;
mod tls;
