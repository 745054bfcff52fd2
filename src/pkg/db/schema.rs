//! pkg(8)'s schema for `local.sqlite`, as `pkgdb_init` in `libpkg/pkgdb.c`
//! creates it (read from pkg's source at the version whose
//! `DB_SCHEMA_MINOR` is 36, which pkg 2.0 to 2.3 write; pkg 2.4 and later
//! upgrade such a database in place on their first writable open, with
//! the steps of `libpkg/private/db_upgrades.h`).
//!
//! The statements are pkg's, in pkg's order, so that `.schema` on a
//! database jbuild wrote reads as one pkg wrote. Only the journal pragmas
//! pkg puts first are left out: jbuild writes with a rollback journal
//! that is deleted on commit, so that a layer holds the one file.

/// `PRAGMA user_version` of a database made here.
pub const USER_VERSION: i64 = 36;

/// The oldest schema jbuild adds packages to: pkg 2.0's. Older ones are
/// pkg 1.x's, which jbuild has not read the upgrade steps of.
pub const OLDEST: i64 = 36;

/// The newest schema jbuild knows of (pkg 2.8's); a database newer than
/// pkg's own is still used by pkg when the major number is the same
/// (`pkgdb_upgrade`), and so is it here.
pub const NEWEST_KNOWN: i64 = 42;

/// `pkgdb_init`'s statements after `BEGIN;`, without the final
/// `PRAGMA user_version` and `COMMIT`.
pub const CREATE: &str = "\
CREATE TABLE packages (\
id INTEGER PRIMARY KEY,\
origin TEXT NOT NULL,\
name TEXT NOT NULL,\
version TEXT NOT NULL,\
comment TEXT NOT NULL,\
desc TEXT NOT NULL,\
mtree_id INTEGER, \
message TEXT,\
arch TEXT NOT NULL,\
maintainer TEXT NOT NULL, \
www TEXT,\
prefix TEXT NOT NULL,\
flatsize INTEGER NOT NULL,\
automatic INTEGER NOT NULL,\
locked INTEGER NOT NULL DEFAULT 0,\
licenselogic INTEGER NOT NULL,\
time INTEGER, \
manifestdigest TEXT NULL, \
pkg_format_version INTEGER,\
dep_formula TEXT NULL\
,vital INTEGER NOT NULL DEFAULT 0\
);\
CREATE UNIQUE INDEX packages_unique ON packages(name);\
CREATE TABLE pkg_script (\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
type INTEGER,\
script_id INTEGER REFERENCES script(script_id) ON DELETE RESTRICT ON UPDATE CASCADE,\
PRIMARY KEY (package_id, type)\
);\
CREATE TABLE script (\
script_id INTEGER PRIMARY KEY,\
script TEXT NOT NULL UNIQUE\
);\
CREATE TABLE option (\
option_id INTEGER PRIMARY KEY,\
option TEXT NOT NULL UNIQUE\
);\
CREATE TABLE option_desc (\
option_desc_id INTEGER PRIMARY KEY,\
option_desc TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_option (\
package_id INTEGER NOT NULL REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
option_id INTEGER NOT NULL REFERENCES option(option_id) ON DELETE RESTRICT ON UPDATE CASCADE,\
value TEXT NOT NULL,\
PRIMARY KEY(package_id, option_id)\
);\
CREATE TABLE pkg_option_desc (\
package_id INTEGER NOT NULL REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
option_id INTEGER NOT NULL REFERENCES option(option_id) ON DELETE RESTRICT ON UPDATE CASCADE,\
option_desc_id INTEGER NOT NULL REFERENCES option_desc(option_desc_id) ON DELETE RESTRICT ON UPDATE CASCADE,\
PRIMARY KEY(package_id, option_id)\
);\
CREATE TABLE pkg_option_default (\
package_id INTEGER NOT NULL REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
option_id INTEGER NOT NULL REFERENCES option(option_id) ON DELETE RESTRICT ON UPDATE CASCADE,\
default_value TEXT NOT NULL,\
PRIMARY KEY(package_id, option_id)\
);\
CREATE TABLE deps (\
origin TEXT NOT NULL,\
name TEXT NOT NULL,\
version TEXT NOT NULL,\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE\
);\
CREATE UNIQUE INDEX deps_unique ON deps(name, version, package_id);\
CREATE TABLE files (\
path TEXT PRIMARY KEY,\
sha256 TEXT,\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE\
);\
CREATE TABLE directories (\
id INTEGER PRIMARY KEY,\
path TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_directories (\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
directory_id INTEGER REFERENCES directories(id) ON DELETE RESTRICT ON UPDATE RESTRICT,\
try INTEGER,\
PRIMARY KEY (package_id, directory_id)\
);\
CREATE TABLE categories (\
id INTEGER PRIMARY KEY,\
name TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_categories (\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
category_id INTEGER REFERENCES categories(id) ON DELETE RESTRICT ON UPDATE RESTRICT,\
PRIMARY KEY (package_id, category_id)\
);\
CREATE TABLE licenses (\
id INTEGER PRIMARY KEY,\
name TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_licenses (\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
license_id INTEGER REFERENCES licenses(id) ON DELETE RESTRICT ON UPDATE RESTRICT,\
PRIMARY KEY (package_id, license_id)\
);\
CREATE TABLE users (\
id INTEGER PRIMARY KEY,\
name TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_users (\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
user_id INTEGER REFERENCES users(id) ON DELETE RESTRICT ON UPDATE RESTRICT,\
UNIQUE(package_id, user_id)\
);\
CREATE TABLE groups (\
id INTEGER PRIMARY KEY,\
name TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_groups (\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
group_id INTEGER REFERENCES groups(id) ON DELETE RESTRICT ON UPDATE RESTRICT,\
UNIQUE(package_id, group_id)\
);\
CREATE TABLE shlibs (\
id INTEGER PRIMARY KEY,\
name TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_shlibs_required (\
package_id INTEGER NOT NULL REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
shlib_id INTEGER NOT NULL REFERENCES shlibs(id) ON DELETE RESTRICT ON UPDATE RESTRICT,\
UNIQUE (package_id, shlib_id)\
);\
CREATE TABLE pkg_shlibs_provided (\
package_id INTEGER NOT NULL REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE,\
shlib_id INTEGER NOT NULL REFERENCES shlibs(id) ON DELETE RESTRICT ON UPDATE RESTRICT,\
UNIQUE (package_id, shlib_id)\
);\
CREATE TABLE annotation (\
annotation_id INTEGER PRIMARY KEY,\
annotation TEXT NOT NULL UNIQUE\
);\
CREATE TABLE pkg_annotation (\
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE RESTRICT,\
tag_id INTEGER NOT NULL REFERENCES annotation(annotation_id) ON DELETE CASCADE ON UPDATE RESTRICT,\
value_id INTEGER NOT NULL REFERENCES annotation(annotation_id) ON DELETE CASCADE ON UPDATE RESTRICT,\
UNIQUE (package_id, tag_id)\
);\
CREATE TABLE pkg_conflicts (\
package_id INTEGER NOT NULL REFERENCES packages(id)  ON DELETE CASCADE ON UPDATE CASCADE,\
conflict_id INTEGER NOT NULL,\
UNIQUE(package_id, conflict_id)\
);\
CREATE TABLE pkg_lock (\
exclusive INTEGER(1),\
advisory INTEGER(1),\
read INTEGER(8)\
);\
CREATE TABLE pkg_lock_pid (\
pid INTEGER PRIMARY KEY\
);\
INSERT INTO pkg_lock VALUES(0,0,0);\
CREATE TABLE provides(    id INTEGER PRIMARY KEY,    provide TEXT NOT NULL);\
CREATE TABLE pkg_provides (\
package_id INTEGER NOT NULL REFERENCES packages(id)  ON DELETE CASCADE ON UPDATE CASCADE,\
provide_id INTEGER NOT NULL REFERENCES provides(id)  ON DELETE RESTRICT ON UPDATE RESTRICT,\
UNIQUE(package_id, provide_id)\
);\
CREATE TABLE config_files (\
path TEXT NOT NULL UNIQUE, \
content TEXT, \
package_id INTEGER REFERENCES packages(id) ON DELETE CASCADE ON UPDATE CASCADE\
);\
CREATE INDEX deporigini on deps(origin);\
CREATE INDEX pkg_script_package_id ON pkg_script(package_id);\
CREATE INDEX deps_package_id ON deps (package_id);\
CREATE INDEX files_package_id ON files (package_id);\
CREATE INDEX pkg_directories_package_id ON pkg_directories (package_id);\
CREATE INDEX pkg_categories_package_id ON pkg_categories (package_id);\
CREATE INDEX pkg_licenses_package_id ON pkg_licenses (package_id);\
CREATE INDEX pkg_users_package_id ON pkg_users (package_id);\
CREATE INDEX pkg_groups_package_id ON pkg_groups (package_id);\
CREATE INDEX pkg_shlibs_required_package_id ON pkg_shlibs_required (package_id);\
CREATE INDEX pkg_shlibs_provided_package_id ON pkg_shlibs_provided (package_id);\
CREATE INDEX pkg_directories_directory_id ON pkg_directories (directory_id);\
CREATE INDEX pkg_annotation_package_id ON pkg_annotation(package_id);\
CREATE INDEX pkg_digest_id ON packages(origin, manifestdigest);\
CREATE INDEX pkg_conflicts_pid ON pkg_conflicts(package_id);\
CREATE INDEX pkg_conflicts_cid ON pkg_conflicts(conflict_id);\
CREATE INDEX pkg_provides_id ON pkg_provides(package_id);\
CREATE INDEX packages_origin ON packages(origin COLLATE NOCASE);\
CREATE INDEX packages_name ON packages(name COLLATE NOCASE);\
CREATE TABLE requires(    id INTEGER PRIMARY KEY,    require TEXT NOT NULL);\
CREATE TABLE pkg_requires (\
package_id INTEGER NOT NULL REFERENCES packages(id)  ON DELETE CASCADE ON UPDATE CASCADE,\
require_id INTEGER NOT NULL REFERENCES requires(id)  ON DELETE RESTRICT ON UPDATE RESTRICT,\
UNIQUE(package_id, require_id)\
);\
CREATE TABLE lua_script(    lua_script_id INTEGER PRIMARY KEY,    lua_script TEXT NOT NULL UNIQUE);\
CREATE TABLE pkg_lua_script (\
package_id INTEGER NOT NULL REFERENCES packages(id)  ON DELETE CASCADE ON UPDATE CASCADE,\
lua_script_id INTEGER NOT NULL REFERENCES lua_script(lua_script_id)  ON DELETE RESTRICT ON UPDATE RESTRICT,\
type INTEGER,\
UNIQUE(package_id, lua_script_id)\
);";

/// The tables jbuild writes rows into: each must be a plain table of an
/// existing database, with no trigger on it.
pub const WRITTEN: [&str; 30] = [
    "packages",
    "deps",
    "files",
    "directories",
    "pkg_directories",
    "categories",
    "pkg_categories",
    "licenses",
    "pkg_licenses",
    "users",
    "pkg_users",
    "groups",
    "pkg_groups",
    "script",
    "pkg_script",
    "lua_script",
    "pkg_lua_script",
    "option",
    "pkg_option",
    "shlibs",
    "pkg_shlibs_required",
    "pkg_shlibs_provided",
    "annotation",
    "pkg_annotation",
    "pkg_conflicts",
    "provides",
    "pkg_provides",
    "requires",
    "pkg_requires",
    "config_files",
];
