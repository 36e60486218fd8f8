-- Prepended to lua/rw_common.lua for a semaphore's permits hash: its kind marker, and which
-- departures are announced (every one: any freed permit may let a waiter in).
local KIND = 'permits'

local function departed(_)
    return true
end

-- The permits hash's field that records the count its permits out were granted under, when
-- their clients fixed it (lua/acquire_permit.lua); not a holder.
local FIXED_FIELD = '~count'
