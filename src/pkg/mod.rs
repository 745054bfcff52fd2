//! FreeBSD packages without FreeBSD: the foundation of jbuild's own
//! package installer (issue 31; `docs/packages.md`).
//!
//! What pkg(8) does before it installs anything, read from the same files
//! and formats pkg reads, so that it runs on any host for any architecture:
//!
//! - [`ucl`]: the bounded subset of UCL pkg's files are written in;
//! - [`abi`]: `FreeBSD:14:amd64` and OSVERSION from the image's userland
//!   and the build's platform, never the host; [`osversion`]: packages
//!   newer than that OSVERSION refused as pkg refuses them;
//! - [`repo_conf`]: the image's repository configurations, later files
//!   overriding earlier ones per key, `${ABI}` and the other variables;
//! - [`catalogue`]: `meta.conf` and the catalogue in each generation pkg
//!   serves (`data.pkg`, `packagesite.pkg`/`.txz`/`.tzst`), bounded;
//! - [`manifest`]: a package's `+MANIFEST`/`+COMPACT_MANIFEST`, every
//!   key pkg reads, bounded, hostile paths refused;
//! - [`db`]: the image's `/var/db/pkg/local.sqlite` in pkg's schema, a
//!   package recorded per transaction as `pkgdb_register_pkg` does;
//! - [`checksum`]: pkg's checksum forms (SHA-256 hex, its base32, BLAKE2b);
//! - [`sign`]: the catalogue's signatures (`pubkey`, `fingerprints`, RSA
//!   and ECDSA), checked before it is parsed; [`repository`]: one
//!   repository read whole in pkg's order, its files fetched by
//!   [`repository_files`] (or kept from the step's key), from the SRV
//!   mirrors of a `pkg+https://` url ([`mirror`]) then the host;
//! - [`resolve`]: the requested packages' dependency closure across
//!   repositories by priority, in install order; [`version`]: versions
//!   compared as `pkg_version_cmp` does;
//! - [`lua`]: a package's Lua scripts with pkg's API, confined to the
//!   image's root and bounded, for the installer to run in pkg's order;
//! - [`script`]: a package's shell scripts, parsed and carried out by a
//!   bounded sh(1) interpreter confined to the image's root, with
//!   jbuild's own file commands and every other command handed to the
//!   caller (the installer's dispatch to `pw`, `pwd_mkdb`, …);
//! - [`fetch`]: the closure's packages downloaded several at a time,
//!   each verified by its catalogue checksum, into jbuild's package cache;
//! - [`certs`]: `certctl rehash` as the image's certctl does it, the
//!   links named by OpenSSL's subject hash (computed by jbuild);
//! - [`hints`]: the dynamic linker's `ld-elf.so.hints` as `ldconfig`
//!   writes it from the directories the image configures, and the
//!   `ldconfig`/`service ldconfig` commands of package scripts;
//! - [`accounts`]: the image's users and groups (`master.passwd`,
//!   `group`, `passwd`, `pwd.db`, `spwd.db`) and the `pw` and `pwd_mkdb`
//!   commands package scripts call, carried out on them;
//! - [`hashdb`]: Berkeley DB 1.85 hash files, the format of `pwd.db`,
//!   `spwd.db`, `services.db` and `login.conf.db`, written as libc reads
//!   them;
//! - [`mkdb`]: `services_mkdb` and `cap_mkdb`, the base system's other
//!   database builders, as native commands;
//! - [`install`]: the one entry, from a root and package names to an
//!   installed, recorded closure;
//! - [`extract`]: packages installed into the image's root as pkg 2.x
//!   extracts them (owners by the image's names, modes, links, flags,
//!   `@config`), through the hostile-layer applier, with hooks for the
//!   package database and Lua scripts in pkg's order.
//!
//! [`install`] joins them in pkg's order: it is what a `PKG` step runs
//! (`engine::pkg`), into the step's root, on every host and for every
//! architecture (`[pkg] installer = "pkg"` runs pkg(8) in the build jail
//! instead, on FreeBSD), and what makes a pkgbase base
//! (`engine::pkgbase`, [`install::install_for`] with the release's ABI).

pub mod abi;
pub mod accounts;
pub mod catalogue;
pub mod certs;
pub mod checksum;
pub mod db;
pub mod extract;
pub mod fetch;
pub mod firstboot;
pub mod hashdb;
pub mod hints;
pub mod install;
pub mod lua;
pub mod manifest;
pub mod merge3;
pub mod mirror;
pub mod mkdb;
pub mod osversion;
pub mod pkg_conf;
pub mod repo_conf;
pub mod repo_error;
pub mod repository;
pub mod repository_files;
pub mod resolve;
pub mod script;
pub mod sign;
pub mod system_shlibs;
pub mod ucl;
pub mod upgrade;
pub mod version;
