-- Argo CD health check for usergroup.dev/UserGroup.
--
-- Argo CD runs this in its Lua sandbox (gopher-lua, Lua 5.1) with only the base, table and
-- package libraries; os.time/os.date exist only through require("os"), never as a global. There
-- is no string or math library, so the script only compares and concatenates values. The object
-- is the global `obj`; any field may be missing. For an object being deleted, Argo CD (v3.6) runs the
-- script and then reports Progressing "Pending deletion; blocked by finalizers: <finalizers>" instead,
-- unless the script sets hs.deletionMessage. This one does not: see deploy/argocd/README.md (Health).
--
--   Progressing  no Ready condition yet; the controller has not observed the latest spec
--                (status.observedGeneration < metadata.generation); a token rotation or a sync was
--                requested and not yet done; or a transient failure the controller is retrying (below)
--   Suspended    spec.suspend is true and the controller reports Ready=False reason Suspended
--   Healthy      Ready=True for the current generation
--   Degraded     Ready=False for the current generation, any other reason; or a scheduled rotation
--                (spec.rotation.maxTokenAge) still not done an hour after it fell due, whatever Ready says:
--                the controller's retries have not helped (or its cap on scheduled rotations is too low)
--
-- ServiceUnavailable and RateLimited are Progressing, not Degraded: the controller retries them
-- by itself (backoff, Retry-After) and nobody has to act. Argo CD fails a sync whose wave waits on
-- a Degraded resource, and on-health-degraded notifications would fire for a blip that heals in
-- seconds. A long outage stays visible in the message (the reason comes first); alert on its
-- duration with the operator's usergroup_usergroups{ready="False"} metric, since this script has no
-- string library to parse lastTransitionTime. Every other reason needs a person (fix the API key,
-- the spec, the Secret, the connection), so it is Degraded; so is a reason this script does not know.

local ROTATE = "usergroup.dev/rotate-requested-at"
local SYNC = "usergroup.dev/sync-requested-at"
local OVERDUE_AFTER_SECONDS = 3600
local RETRIED_BY_THE_CONTROLLER = { ServiceUnavailable = true, RateLimited = true }

-- value[k1][k2]..., or nil as soon as a level is missing or not a table.
local function get(value, ...)
  for i = 1, select("#", ...) do
    if type(value) ~= "table" then
      return nil
    end
    value = value[select(i, ...)]
  end
  return value
end

-- Argo CD passes integers as numbers, but a json.Number arrives as a string.
local function number(value)
  if type(value) == "number" then
    return value
  end
  if type(value) == "string" then
    return tonumber(value)
  end
  return nil
end

local function text(value)
  if value == nil then
    return ""
  end
  return tostring(value)
end

local function readyCondition()
  local conditions = get(obj, "status", "conditions")
  if type(conditions) ~= "table" then
    return nil
  end
  for _, condition in ipairs(conditions) do
    if type(condition) == "table" and condition.type == "Ready" then
      return condition
    end
  end
  return nil
end

-- "<reason>: <message>", or whichever of the two is there.
local function describe(ready)
  local reason, message = text(ready.reason), text(ready.message)
  if reason == "" then
    return message
  end
  if message == "" then
    return reason
  end
  return reason .. ": " .. message
end

-- The due time of a scheduled rotation more than an hour overdue, else nil. The controller writes times in UTC
-- with whole seconds (2026-11-23T02:10:00Z), and such times compare as strings: no string library needed.
local function scheduledRotationOverdue()
  if get(obj, "spec", "rotation", "maxTokenAge") == nil then
    return nil
  end
  local due = get(obj, "status", "rotation", "nextRotationTime")
  if type(due) ~= "string" then
    return nil
  end
  local os = require("os")
  if due < os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() - OVERDUE_AFTER_SECONDS) then
    return due
  end
  return nil
end

local function assess()
  local ready = readyCondition()
  if ready == nil then
    return "Progressing", "Waiting for the controller to report the Ready condition"
  end

  local generation = number(get(obj, "metadata", "generation"))
  local observed = number(get(obj, "status", "observedGeneration"))
  if observed == nil then
    observed = number(ready.observedGeneration)
  end
  if generation ~= nil and (observed == nil or observed < generation) then
    return "Progressing", "Waiting for the controller to observe generation " .. generation
      .. " (status describes " .. text(observed or "no generation") .. ")"
  end

  local suspend = get(obj, "spec", "suspend") == true
  if ready.reason == "Suspended" then
    if suspend then
      return "Suspended", describe(ready)
    end
    return "Progressing", "Waiting for the controller to resume: " .. describe(ready)
  end
  if suspend then
    return "Progressing", "Waiting for the controller to suspend: " .. describe(ready)
  end

  local overdue = scheduledRotationOverdue()
  if overdue ~= nil then
    return "Degraded", "The scheduled token rotation has been due since " .. overdue .. ", more than an hour: "
      .. describe(ready)
  end

  if ready.status == "True" then
    local requested = get(obj, "metadata", "annotations", ROTATE)
    local handled = get(obj, "status", "rotation", "lastHandledRequest")
    if requested ~= nil and requested ~= handled then
      return "Progressing", "Waiting for the controller to rotate the token (" .. ROTATE .. " = "
        .. text(requested) .. ", last handled: " .. text(handled or "none") .. ")"
    end
    requested = get(obj, "metadata", "annotations", SYNC)
    handled = get(obj, "status", "lastHandledSyncRequest")
    if requested ~= nil and requested ~= handled then
      return "Progressing", "Waiting for the controller to sync the group (" .. SYNC .. " = "
        .. text(requested) .. ", last handled: " .. text(handled or "none") .. ")"
    end
    return "Healthy", describe(ready)
  end

  if ready.status == "False" then
    if ready.reason ~= nil and RETRIED_BY_THE_CONTROLLER[ready.reason] then
      return "Progressing", describe(ready)
    end
    return "Degraded", describe(ready)
  end

  -- Ready=Unknown (or anything else): the controller has not decided yet.
  return "Progressing", describe(ready)
end

local hs = {}
hs.status, hs.message = assess()
return hs
