-- Prepended to acquire.lua on Redis Cluster members: every new hold's fencing candidate is at
-- least the clock in microseconds. A failover to a replica that missed the last grants brings
-- back an older counter, not a missing one; the clock is past every token handed out before it
-- (see docs/fencing.md).
local CLOCK_EVERY_HOLD = true
