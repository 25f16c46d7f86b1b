// Initialises js-ipfs repos as `jsipfs init --profile test` does one, several in one Node process:
// loading js-ipfs costs about 4 CPU-seconds, which a `jsipfs init` per repo paid once a repo
// (client.devnet.ipfs.init_repos runs this).
// Usage: node --require <promise-with-resolvers.cjs> init-repos.mjs <ipfs-core's index.js> REPO...
import { pathToFileURL } from 'node:url';

const [entry, ...repos] = process.argv.slice(2);
if (!entry || repos.length === 0) {
  process.stderr.write('usage: init-repos.mjs IPFS_CORE_INDEX REPO...\n');
  process.exit(2);
}
const IPFS = await import(pathToFileURL(entry).href);
for (const repo of repos) {
  const node = await IPFS.create({
    repo,
    init: { algorithm: 'Ed25519', profiles: ['test'] },
    start: false,
    silent: true,
  });
  await node.stop();
  process.stdout.write(`initialised ${repo}\n`);
}
