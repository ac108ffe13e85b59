// The body of the service's PUT /api/user, built from an UpsertRequest (pure: the client sends it, the sync policy hashes it).
import type { UpsertRequest } from './types.js';

/** The exact JSON object sent by PUT /api/user; optional fields appear only when defined. */
export function buildUpsertBody(req: UpsertRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { user_group_id: req.userGroupId, name: req.name };
  if (req.mapping !== undefined) {
    body.mapping = { ...req.mapping };
  }
  if (req.properties !== undefined) {
    body.properties = { ...req.properties };
  }
  return body;
}
