//! Jail parameters, in one place: their names, the image labels they
//! travel in, what each means for the jail and the host, and the user's
//! consent to the ones that weaken the jail or act on the host. Every
//! command that makes a jail (`build`'s step jails, `create`, `create
//! --bundle`, `run`) asks here; none judges a parameter on its own.
//!
//! - **Names** ([`well_formed`]): jail(8)'s, `[a-z0-9_.]` in dot-separated
//!   words (`allow.raw_sockets`, `sysvshm`, `osrelease`).
//! - **Labels** ([`labels`]): an image carries the parameters it asks for
//!   as config labels, `org.freebsd.jail.<param>` (the FreeBSD image
//!   world's own; jbuild's older `org.jbuild.jail.<param>` is still read,
//!   the new one winning). A permission (`allow.*`) is written `required`
//!   or `false` and read back as jail(8) takes it ([`permission_value`]);
//!   `build --jail-annotations` offers them as manifest annotations
//!   ([`jail_annotation_value`]).
//! - **Judgement** ([`judge`](mod@judge)): an image may come from anyone, so each
//!   parameter it asks for is one of
//!   - *fine*: it acts only inside the jail (`securelevel`, `osrelease`,
//!     `sysvshm=new`, `allow.set_hostname`, ...) and goes into the jail as
//!     it is;
//!   - *jbuild's*: `name`, `jid` and `path` are the jail's identity, which
//!     `create` gives; the image's value is left out, with a comment;
//!   - *needs consent*: it weakens the jail ([`needs_opt_in`]: most
//!     `allow.*`, `devfs_ruleset` other than 4, `enforce_statfs` below 2,
//!     `children.max` above 0, System V IPC `inherit`), or it acts on the
//!     host ([`acts_on_host`]: `exec.prestart` and the other commands
//!     jail(8) runs outside the jail, `mount.fstab`, `ip4.addr`, ...);
//!   - a *host mount*: a VOLUME's fstab line (`org.jbuild.fstab.<dir>`,
//!     what a Bastille template's MOUNT becomes) nullfs-mounts a host path
//!     into the jail, so it needs consent as `mount.fstab` does
//!     ([`host_mount`]); once agreed it goes to the jail's fstab file, not
//!     into the entry;
//!   - *invalid*: a name that is not a jail parameter's, a value with
//!     control characters, a permission whose value is not a boolean. The
//!     image is refused: jail.conf(5) is not written from it.
//!
//!   A build jail's recipe (`JAIL name=value`) is judged the same way for
//!   consent; on top, the parameters jbuild owns in a build jail or that
//!   act on the host are refused outright ([`refused_in_recipe`]: they
//!   describe the runtime jail, and the build leaves them out).
//! - **Consent** ([`consent`]): the user names each parameter that needs it
//!   (`--allow-jail-param NAME`, or `[freebsd] allow_jail_params` in the
//!   configuration: [`allowed`]); a command stops before anything is made,
//!   naming every parameter still missing at once ([`agreed`]).
//!
//! The command lines of a build jail (`jail -c`, its defaults) are
//! `exec::jail_params`'s; the jail.conf(5) entry `create` writes is
//! `jailconf`'s.

pub mod consent;
pub mod judge;
pub mod labels;

pub use consent::{agreed, allowed, Agreed, ParamsError};
pub use judge::{
    acts_on_host, from_config_json, host_mount, judge, needs_opt_in, read, refused_in_recipe,
    to_json, well_formed, ImageParam, Judgement, DEVFS_RULESET_JAIL, FSTAB_LABEL,
};
pub use labels::{
    is_jail_label, jail_annotation_value, jail_label_value, jail_labels, jail_param_value,
    permission_value, JailLabel, JAIL_LABEL_PREFIX, OLD_JAIL_LABEL_PREFIX,
};
