// Prompts the kubelet of consenting Pods to rewrite a mounted token now: one annotation, no restart.
import { FIELD_MANAGER } from '../api/constants.js';
import { parseConsentingPods, refreshConsentKey, refreshedForKey, type ConsentingPod } from '../api/pod.js';
import { isNotFound, type ApiError } from './api-error.js';
import { call, type KubeClient } from './http.js';
import { paths } from './paths.js';

const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
/** A namespace's consenting Pods of one UserGroup, as metadata: a generous bound on what one list may cost. */
const MAX_LIST_BYTES = 8 * 1024 * 1024;

/** The consenting Pods, and how to prompt one of them (`prompt`, for the same UserGroup in the same namespace); or the refusal. */
export type PodList =
  | { readonly kind: 'listed'; readonly pods: readonly ConsentingPod[]; prompt(pod: string, issuedAt: string): Promise<PromptResult> }
  | { readonly kind: 'refused'; readonly error: ApiError };
export type PromptResult = { readonly kind: 'prompted' } | { readonly kind: 'gone' } | { readonly kind: 'refused'; readonly error: ApiError };

export interface PodPrompterOptions {
  /** Runs before every write; throws when this replica does not hold its Lease (by the clock). */
  readonly fence?: () => void;
}

/**
 * The kubelet syncs a Pod whenever the Pod's metadata changes, and a sync rewrites its Secret volumes from the
 * Secrets it watches: an annotation carrying the new token's issue time gets the file rewritten within about a
 * second, where the kubelet's periodic sync takes up to a minute and a half. Pods are read as metadata only
 * (never their spec or environment), selected by their owner's consent label.
 */
export class PodPrompter {
  constructor(
    private readonly client: KubeClient,
    private readonly options: PodPrompterOptions = {},
  ) {}

  async consenting(namespace: string, userGroupName: string): Promise<PodList> {
    const res = await call(this.client, 'GET', paths.pods(namespace), {
      query: { labelSelector: refreshConsentKey(userGroupName) },
      accept: METADATA_LIST,
      maxBytes: MAX_LIST_BYTES,
    });
    if (!res.ok) return { kind: 'refused', error: res.error };
    const pods = parseConsentingPods(res.body, userGroupName);
    if (!pods.ok) throw new Error(`the apiserver returned a Pod list that cannot be parsed: ${pods.error}`);
    return { kind: 'listed', pods: pods.value, prompt: (pod, issuedAt) => this.prompt(namespace, pod, userGroupName, issuedAt) };
  }

  /** Sets `refreshed.usergroup.dev/<userGroupName>` on the Pod; nothing else (the chart's admission policy refuses more). */
  private async prompt(namespace: string, pod: string, userGroupName: string, issuedAt: string): Promise<PromptResult> {
    this.options.fence?.();
    const res = await call(this.client, 'PATCH', paths.pod(namespace, pod), {
      query: { fieldManager: FIELD_MANAGER },
      body: { metadata: { annotations: { [refreshedForKey(userGroupName)]: issuedAt } } },
      contentType: 'application/merge-patch+json',
    });
    if (res.ok) return { kind: 'prompted' };
    if (isNotFound(res.error)) return { kind: 'gone' };
    return { kind: 'refused', error: res.error };
  }
}
