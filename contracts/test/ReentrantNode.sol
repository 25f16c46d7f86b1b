// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {ISwarmLedger} from "../ISwarmLedger.sol";

/// @notice Test-only attacker: a node contract whose receive() re-enters the ledger's `claim`
/// or `withdraw` while being paid. Never deployed outside tests.
contract ReentrantNode {
    ISwarmLedger public immutable ledger;
    uint64[] private _rounds;
    uint8 public mode; // 0: accept, 1: re-enter claim, 2: re-enter withdraw
    uint256 public reentries;
    uint256 public reentriesBlocked;
    uint256 public received;

    constructor(ISwarmLedger ledger_) {
        ledger = ledger_;
    }

    function join(bytes32 family) external payable {
        ledger.register{value: msg.value}("{\"model\":\"attacker\"}", family);
    }

    function submit(uint64 round, bytes32 digest, uint32 rollouts, uint64 score, uint64 signal) external {
        ledger.submit(round, digest, rollouts, score, signal);
    }

    function unstake(uint256 amount) external {
        ledger.requestUnstake(amount);
    }

    function attack(uint8 mode_, uint64[] calldata rounds) external {
        mode = mode_;
        _rounds = rounds;
        if (mode_ == 2) ledger.withdraw();
        else ledger.claim(rounds);
    }

    receive() external payable {
        received += msg.value;
        uint8 m = mode;
        if (m == 0) return;
        mode = 0;
        reentries += 1;
        if (m == 1) {
            try ledger.claim(_rounds) {} catch { reentriesBlocked += 1; }
        } else {
            try ledger.withdraw() {} catch { reentriesBlocked += 1; }
        }
    }
}
