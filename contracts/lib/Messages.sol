// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @title Messages
/// @notice The swarm's signed messages (EIP-712), hashed and their signers recovered as the
/// client signs them (client/chain/messages.py): a producer's `Submission` of one round and a
/// checker's `Vote` on one batch, under the domain of one deployment (name "sapo-swarm",
/// version "1", the chain id and the verifying contract). A signature is accepted only in its
/// canonical form (r and s non-zero, r below the curve order, s in its lower half, v 27 or 28):
/// the other valid signature of the same message would otherwise count as a second message.
library Messages {
    bytes32 internal constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 internal constant NAME_HASH = keccak256("sapo-swarm");
    bytes32 internal constant VERSION_HASH = keccak256("1");
    bytes32 internal constant SUBMISSION_TYPEHASH =
        keccak256("Submission(uint64 round,bytes32 digest,uint32 rollouts,uint64 score,uint64 signal)");
    bytes32 internal constant VOTE_TYPEHASH = keccak256(
        "Vote(uint64 round,address producer,bytes32 digest,bool unavailable,uint64 score,uint64 signal,uint16 findings)"
    );
    /// @dev An aggregator's receipt of a message it holds (`message`: that message's signing
    /// hash; `signer`: who signed it). The signer is bound too: two checkers' agreeing votes on a
    /// batch are often the same message, and a receipt of one must not pass for the other's
    bytes32 internal constant RECEIPT_TYPEHASH = keccak256("Receipt(bytes32 message,address signer)");
    /// @dev secp256k1's group order, and its half: the largest canonical s (EIP-2)
    uint256 internal constant CURVE_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141;
    uint256 internal constant HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    struct Submission {
        uint64 round;
        bytes32 digest;
        uint32 rollouts;
        uint64 score;
        uint64 signal;
    }

    struct Vote {
        uint64 round;
        address producer;
        bytes32 digest;
        bool unavailable;
        uint64 score;
        uint64 signal;
        uint16 findings;
    }

    /// @dev The domain separator of the deployment at `verifyingContract` on this chain.
    function domainSeparator(address verifyingContract) internal view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, verifyingContract));
    }

    function structHash(Submission memory s) internal pure returns (bytes32) {
        return keccak256(abi.encode(SUBMISSION_TYPEHASH, s.round, s.digest, s.rollouts, s.score, s.signal));
    }

    function structHash(Vote memory v) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(VOTE_TYPEHASH, v.round, v.producer, v.digest, v.unavailable, v.score, v.signal, v.findings)
        );
    }

    function receiptHash(bytes32 message, address aggregator) internal pure returns (bytes32) {
        return keccak256(abi.encode(RECEIPT_TYPEHASH, message, aggregator));
    }

    /// @dev What is signed: keccak256(0x1901 ++ domainSeparator ++ hashStruct(message)).
    function signingHash(bytes32 separator, bytes32 hashOfStruct) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(hex"1901", separator, hashOfStruct));
    }

    /// @dev The address whose key made the 65-byte signature (r ++ s ++ v) of `hash`, or
    /// address(0) when the signature is malformed, not canonical, or recovers no key.
    function signer(bytes32 hash, bytes memory signature) internal pure returns (address) {
        if (signature.length != 65) return address(0);
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly ("memory-safe") {
            r := mload(add(signature, 0x20))
            s := mload(add(signature, 0x40))
            v := byte(0, mload(add(signature, 0x60)))
        }
        if (v != 27 && v != 28) return address(0);
        if (uint256(r) == 0 || uint256(r) >= CURVE_N || uint256(s) == 0 || uint256(s) > HALF_N) {
            return address(0);
        }
        return ecrecover(hash, v, r, s);
    }
}
