//! The jail(8) parameters an image asks for, judged and agreed to before a
//! jail is made: [`crate::jailparam`] holds them (names, labels,
//! judgement, consent); the names are here too, where `create` and the
//! commands that make jails first found them.

pub use crate::jailparam::{
    acts_on_host, agreed, from_config_json, host_mount, judge, read, to_json, Agreed, ImageParam,
    Judgement, ParamsError, FSTAB_LABEL,
};
