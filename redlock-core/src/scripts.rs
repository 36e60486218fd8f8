//! The Lua scripts of the plain Redlock lock (sources in `scripts/*.lua`).

use std::sync::LazyLock;

use crate::LockScript;

pub(crate) static ACQUIRE: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(include_str!("scripts/acquire.lua")));
pub(crate) static RELEASE: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(include_str!("scripts/release.lua")));
pub(crate) static EXTEND: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(include_str!("scripts/extend.lua")));
