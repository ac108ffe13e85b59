import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import type { NodeLayout } from './layout.js';

/**
 * The kubelet's configuration for this node: cgroup v1 allowed (kubelet 1.37 refuses it unless failCgroupV1 is
 * false; KEP 5573), the cgroupfs driver under the run's own cgroup parent, containerd's socket in the work dir,
 * swap allowed, no resolver (no cluster DNS: Pods get the node's resolv.conf), relaxed eviction and image GC
 * (the images exist only locally: a GC would lose them), webhook authn/authz off (the apiserver has no kubelet
 * client certificate; the kubelet serves on the node's private network namespace only).
 */
export function writeKubeletConfig(layout: NodeLayout, containerdSocket: string): string {
  const dir = path.join(layout.root, 'kubelet');
  fs.mkdirSync(path.join(dir, 'root'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'pod-logs'), { recursive: true });
  const config = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: `/${layout.name}`,
    containerRuntimeEndpoint: `unix://${containerdSocket}`,
    failSwapOn: false,
    podLogsDir: path.join(dir, 'pod-logs'),
    address: '0.0.0.0',
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: 'AlwaysAllow' },
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    // The images `ctr import` put on the node are used with imagePullPolicy Never. Once the kubelet itself has pulled
    // an image with the same ID (the release e2e pulls the identical amd64 image from its registry), it no longer
    // counts the imported name as preloaded and wants its pull credentials verified, which Never forbids:
    // ErrImageNeverPull for every later Pod of the imported image (KEP-2535). A test node has no private images.
    imagePullCredentialsVerificationPolicy: 'NeverVerify',
    resolvConf: '',
    // Pod status reaches the apiserver sooner: the tests wait on it.
    nodeStatusUpdateFrequency: '5s',
  };
  const file = path.join(dir, 'config.yaml');
  fs.writeFileSync(file, stringify(config));
  return file;
}

export function kubeletArgs(layout: NodeLayout, configFile: string, kubeconfig: string): string[] {
  return [
    `--config=${configFile}`,
    `--kubeconfig=${kubeconfig}`,
    `--root-dir=${path.join(layout.root, 'kubelet', 'root')}`,
    `--hostname-override=${layout.nodeName}`,
    `--node-ip=${layout.address}`,
    '--v=2',
  ];
}
