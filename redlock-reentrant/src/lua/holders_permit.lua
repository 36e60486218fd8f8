-- Prepended to lua/rw_common.lua for a semaphore's permits hash: its kind marker, and which
-- departures are announced (every one: any freed permit may let a waiter in).
local KIND = 'permits'

local function departed(_)
    return true
end
