//! What the tests share, in one tree: running the real `jbuild` binary
//! (`common`), a real Distribution registry and what goes around it
//! (`registry`), tar streams written and read from the spec (`tar`), trees
//! and layers (`layer`), hostile layers and archives (`hostile`), scripted
//! servers and measured runs (`limits`), zfs-fuse pools (`zfs_fuse`), and
//! the lanes every test declares (`lane`). Data the tests read sits beside
//! this tree, in `tests/data/`.
#![allow(dead_code)]

#[macro_use]
pub mod lane;

pub mod backends;
pub mod common;
pub mod dns;
pub mod hostile;
pub mod jailconf_reader;
pub mod layer;
pub mod limits;
pub mod origins;
pub mod pkgrepo;
pub mod registry;
pub mod tar;
pub mod zfs_fuse;
