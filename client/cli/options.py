"""Options a group of commands shares, declared once and handed to each command as one value,
the way cast flattens its RpcOpts into every subcommand (Typer has no `flatten` of its own).

`flattened(Opts, {"name": OptionType, ...})` makes a decorator that appends those options to a
command's own parameters and calls the command with `opts=Opts(name=..., ...)` in the place of
its parameter annotated `Opts`.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

Command = TypeVar("Command", bound=Callable[..., Any])


def flattened(opts: type, options: dict[str, Any]) -> Callable[[Command], Command]:
    """A decorator giving a command the `options` (name -> Annotated Typer option), after its
    own parameters; the command receives them as an `opts` instance in its one parameter of
    that type (whose default, never used, keeps Python's parameter order valid)."""

    def decorate(command: Command) -> Command:
        hints = typing.get_type_hints(command, include_extras=True)
        [target] = [name for name, hint in hints.items() if hint is opts]
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values()
            if p.name != target
        ]
        keyword = inspect.Parameter.KEYWORD_ONLY
        added = [
            inspect.Parameter(n, keyword, default=None, annotation=t) for n, t in options.items()
        ]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            kwargs[target] = opts(**{n: kwargs.pop(n, None) for n in options})
            return command(*args, **kwargs)

        del run.__wrapped__  # Typer reads the signature below, not the command's
        parameters = sorted(own + added, key=lambda p: p.kind)  # keyword-only ones last
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        return run  # type: ignore[return-value]

    return decorate
