-- Prepended to acquire.lua on standalone masters: a new hold's fencing candidate comes from the
-- counter, and from the clock only where the counter is missing (see docs/fencing.md).
local CLOCK_EVERY_HOLD = false
