-- Argo CD action discovery for usergroup.dev/UserGroup: offers "rotate" (see rotate/action.lua).
--
-- Disabled while spec.suspend is true: a suspended group makes no call to the service, so the
-- request would only wait, silently, until someone resumes the group (and then rotate). Better to
-- say so in the UI than to accept a click that does nothing now.

local suspended = type(obj.spec) == "table" and obj.spec.suspend == true

local actions = {}
actions["rotate"] = {
  disabled = suspended,
  displayName = "Rotate token",
  iconClass = "fa fa-fw fa-key",
}
return actions
