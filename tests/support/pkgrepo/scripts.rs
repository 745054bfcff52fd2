//! The shell scripts packages carry, as the ports tree and FreeBSD's
//! release tooling write them (`../shared/notes/pkg-anyhost.md` §4.3),
//! for test packages' `scripts` (written here from the templates'
//! documented text, not from jbuild).

/// One user of a `USERS=` port (a line of the ports tree's `UIDs`).
pub struct User<'a> {
    pub login: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub gecos: &'a str,
    pub home: &'a str,
    pub shell: &'a str,
}

/// One group of a `GROUPS=` port, with the port's users listed in it in
/// `GIDs` (each gets a `groupmod -m`).
pub struct Group<'a> {
    pub name: &'a str,
    pub gid: u32,
    pub members: &'a [&'a str],
}

/// Which generation of `Mk/Scripts/do-users-groups.sh`: the newer one
/// stops on a failing `pw` (`|| exit $?`) and drops the messages' dots.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Older,
    Newer,
}

/// The pre-install script `USERS=`/`GROUPS=` generate.
pub fn users_groups(users: &[User], groups: &[Group], variant: Variant) -> String {
    let (dot, fatal) = match variant {
        Variant::Older => (".", ""),
        Variant::Newer => ("", " || exit $?"),
    };
    let mut s = String::from(
        "if [ -n \"${PKG_ROOTDIR}\" ] && [ \"${PKG_ROOTDIR}\" != \"/\" ]; then\n  \
         PW=\"/usr/sbin/pw -R ${PKG_ROOTDIR}\"\nelse\n  PW=/usr/sbin/pw\nfi\n",
    );
    s += &format!("echo \"===> Creating groups{dot}\"\n");
    for g in groups {
        s += &format!(
            "if ! ${{PW}} groupshow {n} >/dev/null 2>&1; then\n  \
             echo \"Creating group '{n}' with gid '{gid}'{dot}\"\n  \
             ${{PW}} groupadd {n} -g {gid}{fatal}\nelse\n  \
             echo \"Using existing group '{n}'{dot}\"\nfi\n",
            n = g.name,
            gid = g.gid
        );
    }
    s += &format!("echo \"===> Creating users{dot}\"\n");
    for u in users {
        s += &format!(
            "if ! ${{PW}} usershow {l} >/dev/null 2>&1; then\n  \
             echo \"Creating user '{l}' with uid '{uid}'{dot}\"\n  \
             ${{PW}} useradd {l} -u {uid} -g {gid} -c \"{gecos}\" -d {home} -s {shell}{fatal}\n\
             else\n  echo \"Using existing user '{l}'{dot}\"\nfi\n",
            l = u.login,
            uid = u.uid,
            gid = u.gid,
            gecos = u.gecos,
            home = u.home,
            shell = u.shell
        );
    }
    let homes: Vec<&User> = users
        .iter()
        .filter(|u| !["/", "/nonexistent", "/var/empty"].contains(&u.home))
        .collect();
    if !homes.is_empty() {
        s += &format!("echo \"===> Creating homedir(s){dot}\"\n");
    }
    for u in homes {
        let group = groups
            .iter()
            .find(|g| g.gid == u.gid)
            .map_or(u.login, |g| g.name);
        s += &format!(
            "if [ -n \"${{PKG_ROOTDIR}}\" ] && [ \"${{PKG_ROOTDIR}}\" != \"/\" ]; then\n  \
             HOMEDIR=\"${{PKG_ROOTDIR}}/{home}\"; MDBDIR=\"-N ${{PKG_ROOTDIR}}/etc/\"\n\
             else\n  HOMEDIR=\"{home}\"; MDBDIR=\"\"\nfi\n\
             /usr/bin/install ${{MDBDIR}} -d -g {group} -o {l} ${{HOMEDIR}}\n",
            home = u.home,
            l = u.login
        );
    }
    for g in groups {
        for m in g.members {
            s += &format!(
                "if ! ${{PW}} groupshow {n} | grep -qw {m}; then\n  \
                 echo \"Adding user '{m}' to group '{n}'{dot}\"\n  \
                 ${{PW}} groupmod {n} -m {m}{fatal}\nfi\n",
                n = g.name
            );
        }
    }
    s
}

/// `@ldconfig`'s post-install (`Keywords/ldconfig.ucl`).
pub const LDCONFIG: &str = "if ! /usr/sbin/service ldconfig restart >/dev/null; then\n\
     \tif [ -z \"${INSTALL_AS_USER}\" ]; then\n\t\texit 1\n\tfi\nfi\n";

/// FreeBSD-caroot's post-install (`release/packages/caroot.ucl`).
pub const CERTCTL: &str =
    "[ -x /usr/sbin/certctl ] && env DESTDIR=${PKG_ROOTDIR} \\\n    /usr/sbin/certctl rehash\n";

/// FreeBSD-runtime's post-install (`release/packages/runtime.ucl`, with
/// `%CAP_MKDB_ENDIAN%` as amd64's `-l`).
pub const RUNTIME: &str = "cap_mkdb -l ${PKG_ROOTDIR}/etc/login.conf\n\
     pwd_mkdb -i -p -d  ${PKG_ROOTDIR}/etc ${PKG_ROOTDIR}/etc/master.passwd\n\
     services_mkdb -l -q -o ${PKG_ROOTDIR}/var/db/services.db ${PKG_ROOTDIR}/etc/services\n\
     chmod 1777 ${PKG_ROOTDIR}/tmp\n";

/// `@fc DIR`'s post-install (`Keywords/fc.ucl`, `%D/%@` expanded).
pub fn fc_cache(dir: &str) -> String {
    format!("fc-cache -s {dir} 2>/dev/null || true\n")
}
