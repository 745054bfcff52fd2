//! Which unpacked layers the images in the store still use: the library's
//! [`jbuild::check::chains_in_use`], shared by `prune` and `check`.

pub use jbuild::check::chains_in_use;
