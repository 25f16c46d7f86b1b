"""The devnet's accounts: anvil's dev accounts, derived from its public test mnemonic (funded by
anvil at start). Devnet use only: their keys are public."""

from __future__ import annotations

from eth_account import Account
from eth_account.signers.local import LocalAccount

from client.devnet.anvil import DEV_MNEMONIC


def dev_account(index: int) -> LocalAccount:
    """Returns anvil's dev account `index` (from the public test mnemonic)."""
    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")
