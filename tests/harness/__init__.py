"""What tests and scripts build their worlds with, imported as `tests.harness.<module>`:

- processes: `sapo` as a child process that dies with the run, waiting, listening ports
- devnets: `sapo devnet up` in the foreground, stopped as Ctrl-C would
- warp: in-process nodes on a chain whose clock a test moves (the warp world)
- ledger_swarm: a deployed SwarmLedger and accounts, with the chain's time in hand
- batches: rollout batches, made up or sampled on a policy
- policies: the session's seed-test policy, copied where it is needed
- foundry: forge builds, invariant campaigns and mutants
- gate: a TCP gate that cuts a link for real
- tui_model: a fixed read model for the TUI's snapshots
"""
