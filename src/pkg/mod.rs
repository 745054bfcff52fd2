//! FreeBSD packages without FreeBSD: the foundation of jbuild's own
//! package installer (issue 31; `docs/packages.md`).
//!
//! What pkg(8) does before it installs anything, read from the same files
//! and formats pkg reads, so that it runs on any host for any architecture:
//!
//! - [`ucl`]: the bounded subset of UCL pkg's files are written in;
//! - [`abi`]: `FreeBSD:14:amd64` and OSVERSION from the image's userland
//!   and the build's platform, never the host;
//! - [`repo_conf`]: the image's repository configurations, later files
//!   overriding earlier ones per key, `${ABI}` and the other variables;
//!
//! Nothing in the build calls this module yet: `PKG` still runs pkg(8) in
//! the build jail. The engine will call it once it is restructured.

pub mod abi;
pub mod repo_conf;
pub mod ucl;
