// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

import {IRoundBook} from "../IRoundBook.sol";

/// @notice Test-only: a challenger whose receive() reverts until it is told to accept, so that a
/// payment to it cannot block the close of its challenge. Never deployed outside tests.
contract RefusingChallenger {
    IRoundBook public immutable book;
    bool public accepting;

    constructor(IRoundBook book_) {
        book = book_;
    }

    function challenge(uint64 round, bool verdictTree, uint32 index) external payable {
        book.challengeData{value: msg.value}(round, verdictTree, index);
    }

    function collect() external {
        accepting = true;
        book.withdrawOwed();
    }

    receive() external payable {
        require(accepting, "refused");
    }
}
