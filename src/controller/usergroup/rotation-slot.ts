// Step 6b, rotation slot: a slot of the scheduled-rotation cap or the namespace budget before a rotation begins
// (policies/rotation.ts rotationGate says which).
import { rotationGate } from '../policies/rotation.js';
import type { ReconcileContext } from './context.js';
import { Events } from './event-messages.js';
import { next, type Step } from './outcome.js';
import type { Plan } from './plan.js';
import { waitForSlot, type Progress } from './progress.js';

/**
 * Takes the rotation's slot. Without one the rotation waits (rotate.ts leaves it alone), the rest of the reconcile
 * converges, and the key comes back at the slot kept for it (wakeAfterSync); an over-budget request is said once,
 * with a `RotationRequestWaiting` Event. No request and nothing due: nothing asked, no call, no write.
 */
export function awaitRotationSlot(ctx: ReconcileContext, plan: Plan, progress: Progress): Promise<Step<Progress>> {
  const { rotation } = plan;
  switch (rotationGate(rotation, progress.adopted?.tokenRotated === true)) {
    case 'none':
      return Promise.resolve(next(progress));
    case 'scheduled-cap': {
      const slot = ctx.ports.caps.take('scheduled-rotation', ctx.key);
      return Promise.resolve(next(slot.kind === 'wait' ? waitForSlot(progress, 'rotation', slot.inMs) : progress));
    }
    case 'request-budget': {
      // The slot stays the key's until rotate.ts has written the intent (then it is spent): an intent write that
      // fails (a Secret met on create, a refused write) comes back to the same slot instead of paying twice.
      const slot = ctx.ports.caps.take('rotation-request', ctx.key);
      if (slot.kind === 'now') return Promise.resolve(next({ ...progress, rotationSlot: slot }));
      if (slot.first && rotation.kind === 'rotate') {
        ctx.ports.events.emit(ctx.ug, Events.requestWaiting('rotation', rotation.value, slot.inMs, ctx.settings.requestBudgets.rotation));
      }
      return Promise.resolve(next(waitForSlot(progress, 'rotation', slot.inMs)));
    }
  }
}
