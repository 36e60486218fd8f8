//! The watchdog's Lua script (source in `scripts/renew.lua`).

use std::sync::LazyLock;

use redlock_core::LockScript;

pub(crate) static RENEW: LazyLock<LockScript> =
    LazyLock::new(|| LockScript::new(include_str!("scripts/renew.lua")));
