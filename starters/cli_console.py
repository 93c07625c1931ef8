"""agentctl console, users, keys: the console and the identities behind decisions."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from durable_agents.console import users
from durable_agents.control import revocation
from durable_agents.control.errors import one_line
from durable_agents.control.signer import kept_signer, write_new_key
from durable_agents.runtime.client import connect
from durable_agents.runtime.extras import require_all
from durable_agents.runtime.settings import load_settings
from durable_agents.starters.errors import fail, run_async
from durable_agents.starters.terminal import SafeConsole
from durable_agents.workflows.people_inputs import KeyRevocation

console = SafeConsole()
users_app = typer.Typer(
    help="The console's local users (AGENT_CONSOLE_AUTH=users).", no_args_is_help=True
)
signing_app = typer.Typer(
    help="Keys that sign decisions, for a run policy's trusted_keys.", no_args_is_help=True
)


def serve_console() -> None:
    """Serve the console in the foreground (`agentctl up` starts it in the background)."""
    require_all("the console", "console")
    from durable_agents.console.__main__ import main as console_main

    settings = load_settings()
    console.print(f"console: {settings.console_url} (Ctrl-C stops it)")
    console_main()


@users_app.command("add")
def add_user(
    name: Annotated[str, typer.Argument(help="The user's name: what decisions record.")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
) -> None:
    """Add a user, or set an existing user's password."""
    settings = load_settings()
    try:
        users.check_name(name)
        if password_stdin:
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = getpass.getpass(f"password for {name}: ")
            if getpass.getpass("again: ") != password:
                raise fail("the two passwords differ")
        new = users.add_user(settings.console_users_path, name, password)
    except users.UsersFileError as err:
        raise fail(str(err)) from None
    verb = "added" if new else "password changed for"
    console.print(f"{verb} {name} in {settings.console_users_path}")


@users_app.command("list")
def list_users() -> None:
    """The users who may sign in."""
    settings = load_settings()
    try:
        for name in users.user_names(settings.console_users_path):
            typer.echo(name)
    except users.UsersFileError as err:
        raise fail(str(err)) from None


@users_app.command("remove")
def remove_user(name: Annotated[str, typer.Argument(help="The user to remove.")]) -> None:
    """Remove a user (their open sessions end at their next request)."""
    settings = load_settings()
    try:
        if not users.remove_user(settings.console_users_path, name):
            raise fail(f"no user {name!r} in {settings.console_users_path}")
    except users.UsersFileError as err:
        raise fail(str(err)) from None
    console.print(f"removed {name}")


def _trusted_entry(key_id: str, public: str, signs_for: list[str]) -> str:
    entry = {"public_key": public, "signs_for": signs_for}
    return json.dumps({"trusted_keys": {key_id: entry}}, indent=2)


@signing_app.command("new")
def new_key(
    path: Annotated[Path, typer.Argument(help="Where to write the private key (mode 600).")],
    key_id: Annotated[str, typer.Option(help="The key's id in a policy.")] = "",
    signs_for: Annotated[
        str, typer.Option(help="The user it signs for (the policy binds the key to them).")
    ] = "",
) -> None:
    """A signing key of your own: set AGENT_SIGNING_KEY_FILE to it, and put the printed
    entry in the policies that should trust it."""
    who = signs_for or getpass.getuser()
    try:
        public = write_new_key(path)
    except FileExistsError:
        raise fail(f"{path} exists; a key is never overwritten") from None
    except OSError as err:
        raise fail(f"cannot write {path}: {err.strerror}") from None
    typer.echo(_trusted_entry(key_id or who, public, [who]))


@signing_app.command("console")
def console_key() -> None:
    """The console's public key, as a policy's trusted_keys entry (made on first use)."""
    settings = load_settings()
    try:
        signer = kept_signer(settings.console_key_path, settings.console_key_id)
    except ValueError as err:
        raise fail(str(err)) from None
    typer.echo(_trusted_entry(signer.key_id, signer.public_key, []))


@signing_app.command("revoke")
@run_async
async def revoke_key(
    key_ids: Annotated[list[str], typer.Argument(help="The key ids to revoke.")],
    by: Annotated[str, typer.Option(help="Who revokes (the runs' audit says so).")] = "ops",
    reason: Annotated[str, typer.Option(help="Why, for the audit.")] = "",
) -> None:
    """Stop a signing key counting: in every open run now, and (with AGENT_REVOKED_KEYS)
    in every run started later."""
    settings = load_settings()
    try:
        revoked = KeyRevocation(key_ids=key_ids, by=by, reason=reason)
    except ValueError as err:
        raise fail(f"invalid revocation: {one_line(err)}") from None
    told = await revocation.revoke(await connect(settings), settings, revoked)
    console.print(f"revoked {', '.join(key_ids)} in {len(told)} open runs")
    missing = [key for key in key_ids if key not in settings.revoked_keys]
    if missing:
        console.print(f"runs started from now on refuse it once AGENT_REVOKED_KEYS holds {missing}")


def register(app: typer.Typer) -> None:
    app.command("console")(serve_console)
    app.add_typer(users_app, name="users")
    app.add_typer(signing_app, name="signing")
