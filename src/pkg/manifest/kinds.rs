//! The enumerations of a manifest, with the numbers pkg(8) stores for
//! them in its database (`libpkg/pkg.h`).

/// `licenselogic`, with the integers pkg stores for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LicenseLogic {
    #[default]
    Single,
    Or,
    And,
}

impl LicenseLogic {
    /// `packages.licenselogic`: 1, `'|'` or `'&'`.
    pub fn db_value(self) -> i64 {
        match self {
            LicenseLogic::Single => 1,
            LicenseLogic::Or => i64::from(b'|'),
            LicenseLogic::And => i64::from(b'&'),
        }
    }

    pub fn from_db(v: i64) -> LicenseLogic {
        match v {
            124 => LicenseLogic::Or,
            38 => LicenseLogic::And,
            _ => LicenseLogic::Single,
        }
    }
}

/// Shell script types, with pkg's numbers (`pkg_script` in `pkg.h`), which
/// `pkg_script.type` stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScriptType {
    PreInstall = 0,
    PostInstall = 1,
    PreDeinstall = 2,
    PostDeinstall = 3,
    Install = 6,
    Deinstall = 7,
}

impl ScriptType {
    pub const ALL: [ScriptType; 6] = [
        ScriptType::PreInstall,
        ScriptType::PostInstall,
        ScriptType::PreDeinstall,
        ScriptType::PostDeinstall,
        ScriptType::Install,
        ScriptType::Deinstall,
    ];

    pub fn key(self) -> &'static str {
        match self {
            ScriptType::PreInstall => "pre-install",
            ScriptType::PostInstall => "post-install",
            ScriptType::PreDeinstall => "pre-deinstall",
            ScriptType::PostDeinstall => "post-deinstall",
            ScriptType::Install => "install",
            ScriptType::Deinstall => "deinstall",
        }
    }

    pub fn from_key(k: &str) -> Option<ScriptType> {
        ScriptType::ALL.into_iter().find(|t| t.key() == k)
    }

    pub fn db_value(self) -> i64 {
        self as i64
    }

    pub fn from_db(v: i64) -> Option<ScriptType> {
        ScriptType::ALL.into_iter().find(|t| t.db_value() == v)
    }
}

/// Lua script types, with pkg's numbers (`pkg_lua_script`), which
/// `pkg_lua_script.type` stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LuaScriptType {
    PreInstall = 0,
    PostInstall = 1,
    PreDeinstall = 2,
    PostDeinstall = 3,
}

impl LuaScriptType {
    pub const ALL: [LuaScriptType; 4] = [
        LuaScriptType::PreInstall,
        LuaScriptType::PostInstall,
        LuaScriptType::PreDeinstall,
        LuaScriptType::PostDeinstall,
    ];

    pub fn key(self) -> &'static str {
        match self {
            LuaScriptType::PreInstall => "pre-install",
            LuaScriptType::PostInstall => "post-install",
            LuaScriptType::PreDeinstall => "pre-deinstall",
            LuaScriptType::PostDeinstall => "post-deinstall",
        }
    }

    pub fn from_key(k: &str) -> Option<LuaScriptType> {
        LuaScriptType::ALL.into_iter().find(|t| t.key() == k)
    }

    pub fn db_value(self) -> i64 {
        self as i64
    }

    pub fn from_db(v: i64) -> Option<LuaScriptType> {
        LuaScriptType::ALL.into_iter().find(|t| t.db_value() == v)
    }
}

/// When pkg prints a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MessageType {
    #[default]
    Always,
    Install,
    Remove,
    Upgrade,
}

impl MessageType {
    /// The `type` key as pkg writes it (none for `Always`).
    pub fn key(self) -> Option<&'static str> {
        match self {
            MessageType::Always => None,
            MessageType::Install => Some("install"),
            MessageType::Remove => Some("remove"),
            MessageType::Upgrade => Some("upgrade"),
        }
    }
}
