import { ensureBinaries } from '../controlplane/binaries.js';
import { buildGoTool } from '../go-tool.js';

/** The real tools a release is made with, each built from its pinned Go module (or found in the cache). */
export interface ReleaseTools {
  readonly helm: string;
  readonly crane: string;
  readonly cosign: string;
}

export function releaseTools(): ReleaseTools {
  return {
    helm: ensureBinaries().helm,
    crane: buildGoTool('crane', 'devtools/crane/build.sh'),
    cosign: buildGoTool('cosign', 'devtools/cosign/build.sh'),
  };
}
