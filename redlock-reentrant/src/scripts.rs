//! The reentrant lock's Lua scripts (sources in `scripts/*.lua`).

use std::sync::LazyLock;

use redlock_core::LockScript;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<LockScript> =
            LazyLock::new(|| LockScript::new(include_str!(concat!("scripts/", $file))));
    };
}

script!(ACQUIRE, "acquire.lua");
script!(FENCE, "fence.lua");
script!(UNDO, "undo.lua");
script!(UNLOCK, "unlock.lua");
script!(FORCE_UNLOCK, "force_unlock.lua");
script!(INSPECT, "inspect.lua");
script!(ABANDON, "abandon.lua");
#[cfg(feature = "sabotage")]
script!(UNLOCK_WITHOUT_COMPARE, "unlock_without_compare.lua");
