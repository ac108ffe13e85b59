import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHART_DIR, CRDS_DIR, crdFiles } from '../support/manifests.js';

// Helm installs what is in the chart's crds/; everything else (tests, `npm start`, kubectl users) uses the
// top-level crds/. A CRD changed in one place only would ship a schema nobody tested.
describe('the Helm chart ships the CRDs unchanged', () => {
  const chartCrds = path.join(CHART_DIR, 'crds');

  it('has the same CRD files as crds/', () => {
    expect(crdFiles(chartCrds)).toEqual(crdFiles(CRDS_DIR));
    expect(crdFiles(CRDS_DIR).length).toBeGreaterThan(0);
  });

  it.each(crdFiles(CRDS_DIR))('%s is byte-identical (fix: cp crds/*.yaml deploy/helm/usergroup-operator/crds/)', (file) => {
    expect(fs.readFileSync(path.join(chartCrds, file), 'utf8')).toBe(fs.readFileSync(path.join(CRDS_DIR, file), 'utf8'));
  });
});
