// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {Messages} from "../lib/Messages.sol";

/// @notice Test-only: `Messages` behind external calls, so that the client's hashing and
/// signing (client/chain/messages.py) are checked against the contract's on a real chain. It is
/// its own verifying contract. Never deployed outside tests.
contract MessagesHarness {
    function separator() external view returns (bytes32) {
        return Messages.domainSeparator(address(this));
    }

    function submissionHash(Messages.Submission calldata s) external pure returns (bytes32) {
        return Messages.structHash(s);
    }

    function voteHash(Messages.Vote calldata v) external pure returns (bytes32) {
        return Messages.structHash(v);
    }

    function submissionSigner(Messages.Submission calldata s, bytes calldata signature)
        external
        view
        returns (address)
    {
        bytes32 hash = Messages.signingHash(Messages.domainSeparator(address(this)), Messages.structHash(s));
        return Messages.signer(hash, signature);
    }

    function voteSigner(Messages.Vote calldata v, bytes calldata signature) external view returns (address) {
        bytes32 hash = Messages.signingHash(Messages.domainSeparator(address(this)), Messages.structHash(v));
        return Messages.signer(hash, signature);
    }
}
