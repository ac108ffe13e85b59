-- Argo CD action discovery for usergroup.dev/UserGroup: offers "rotate" (see rotate/action.lua) and "sync"
-- (see sync/action.lua).
--
-- Both are disabled while spec.suspend is true or the object is being deleted: the controller makes no
-- call to the service for either, so the request would only wait, unseen. Better to say so in the UI than
-- to accept a click that does nothing now. `argocd app actions run` does not look at `disabled`, so each
-- action refuses the same two cases itself.

local suspended = type(obj.spec) == "table" and obj.spec.suspend == true
local deleting = type(obj.metadata) == "table" and obj.metadata.deletionTimestamp ~= nil

local actions = {}
actions["rotate"] = {
  disabled = suspended or deleting,
  displayName = "Rotate token",
  iconClass = "fa fa-fw fa-key",
}
actions["sync"] = {
  disabled = suspended or deleting,
  displayName = "Sync now",
  iconClass = "fa fa-fw fa-sync",
}
return actions
