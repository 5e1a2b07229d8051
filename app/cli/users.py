"""`python -m app users ...`: the household's people, without the service (docs/household.md).
Each command opens the database the service uses (DATABASE_URL, else DATA_DIR's chat.db,
made if need be: the first person may be added before the first start)."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from app import config
from app.cli.exits import EXIT_ERROR, EXIT_REFUSED

if TYPE_CHECKING:
    from app.store.database import Database
    from app.store.search_shares import Limit


def users_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    users = commands.add_parser(
        "users",
        help="the household: add, list, disable, enable, admin, passwd, link, limit, remove, reset",
    )
    actions = users.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a person (no password: signs in through a proxy)")
    add.add_argument("name")
    add.add_argument("--admin", action="store_true", help="may manage the household")
    add.add_argument("--display-name", help="the name the page shows")
    add.add_argument("--email")
    add.add_argument(
        "--password-stdin", action="store_true", help="the password: standard input's first line"
    )
    add.set_defaults(run=cmd_users_add)
    listing = actions.add_parser("list", help="every person, oldest first")
    listing.set_defaults(run=cmd_users_list)
    disable = actions.add_parser("disable", help="refuse a person's sign-in and sessions")
    disable.add_argument("name")
    disable.set_defaults(run=cmd_users_disable)
    enable = actions.add_parser("enable", help="let a disabled person sign in again")
    enable.add_argument("name")
    enable.set_defaults(run=cmd_users_enable)
    admin = actions.add_parser("admin", help="make a person an admin (--off: no longer one)")
    admin.add_argument("name")
    admin.add_argument("--off", action="store_true", help="no longer an admin")
    admin.set_defaults(run=cmd_users_admin)
    passwd = actions.add_parser(
        "passwd", help="set a person's password (asked twice, or standard input's first line)"
    )
    passwd.add_argument("name")
    passwd.set_defaults(run=cmd_users_passwd)
    limit = actions.add_parser(
        "limit",
        help="a person's share of the Brave plan: queries a UTC day and a calendar month",
    )
    limit.add_argument("name")
    for period, span in (("daily", "a UTC day"), ("monthly", "a calendar month (UTC)")):
        limit.add_argument(
            f"--{period}",
            type=limit_value,
            metavar="N|none|default",
            help=f"Brave queries {span}: a whole number from 0; 'none': no limit; 'default': "
            f"the service's SEARCH_USER_{period.upper()}_LIMIT again (left as it is if not given)",
        )
    limit.set_defaults(run=cmd_users_limit)
    remove = actions.add_parser(
        "remove", help="remove a person and everything of theirs (asks first; --yes does not)"
    )
    remove.add_argument("name")
    remove.add_argument("--yes", action="store_true", help="remove without asking")
    remove.set_defaults(run=cmd_users_remove)
    link = actions.add_parser(
        "link", help="a new one-time sign-in link for a person (a forgotten password)"
    )
    link.add_argument("name")
    link.set_defaults(run=cmd_users_link)
    reset = actions.add_parser("reset", help="end every session of a person's")
    reset.add_argument("name")
    reset.set_defaults(run=cmd_users_reset)


@contextmanager
def household(settings: config.Settings) -> Iterator[Database]:
    from app.store.database import DATABASE, Database

    database = Database(settings.database_url or settings.data_dir / DATABASE)
    try:
        yield database
    finally:
        database.close()


def no_user(name: str) -> int:
    print(f"error: there is no user named {name!r}", file=sys.stderr)
    return EXIT_ERROR


def refused(message: str) -> int:
    print(f"refused: {message}", file=sys.stderr)
    return EXIT_REFUSED


def cmd_users_add(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store.errors import Conflict, Refused
    from app.store.passwords import hash_password
    from app.store.users import NewUser

    try:
        password = hash_password(read_password(ask=False)) if args.password_stdin else None
        new = NewUser(args.name, args.display_name, args.email, args.admin, password)
        with household(settings) as database:
            user = database.add_user(new)
    except (Refused, Conflict) as exc:
        return refused(str(exc))
    kind = "an admin" if user.admin else "a user"
    how = "with a password" if user.password else "without a password (signs in through a proxy)"
    print(f"added {user.name}, {kind}, {how}")
    return 0


def limit_value(text: str) -> Limit:
    """N, 'none' or 'default', as `users limit` takes it."""
    from app.store.search_shares import DEFAULT, NO_LIMIT

    if text == DEFAULT:
        return DEFAULT
    if text == NO_LIMIT:
        return NO_LIMIT
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number from 0, {NO_LIMIT!r} or {DEFAULT!r}"
        )
    return int(text)


def cmd_users_limit(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store.search_shares import ShareLimits

    if args.daily is None and args.monthly is None:
        return refused("say --daily, --monthly or both")
    with household(settings) as database:
        found = database.set_search_limits(args.name, args.daily, args.monthly)
        share = database.search_share(args.name, ShareLimits.default(settings))
    if not found or share is None:
        return no_user(args.name)
    print(f"{args.name}: {share.described()}")
    return 0


def cmd_users_list(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store.search_shares import ShareLimits

    with household(settings) as database:
        users = database.users()
        every = database.search_shares(ShareLimits.default(settings))
        shares = {share.name: share for share in every}
    if not users:
        print("no users: the service serves one person (docs/household.md)")
    for user in users:
        marks = [
            "admin" if user.admin else "user",
            *(["disabled"] if user.disabled else []),
            "password" if user.password else "no password",
        ]
        shown = " ".join(filter(None, [user.display_name, user.email and f"<{user.email}>"]))
        share = shares[user.name].described()
        print("\t".join([user.name, ", ".join(marks), user.created[:19] + "Z", shown, share]))
    return 0


def cmd_users_disable(args: argparse.Namespace, settings: config.Settings) -> int:
    told = f"disabled {args.name}: their sessions are ended and sign-ins refused from now on"
    return set_disabled(settings, args.name, True, told)


def cmd_users_enable(args: argparse.Namespace, settings: config.Settings) -> int:
    told = f"enabled {args.name}: they may sign in again (their old sessions stay ended)"
    return set_disabled(settings, args.name, False, told)


def set_disabled(settings: config.Settings, name: str, disabled: bool, told: str) -> int:
    return change_person(settings, name, told, disabled=disabled)


def cmd_users_admin(args: argparse.Namespace, settings: config.Settings) -> int:
    told = "no longer an admin" if args.off else "an admin: they may manage the people"
    return change_person(settings, args.name, f"{args.name} is {told}", admin=not args.off)


def change_person(
    settings: config.Settings,
    name: str,
    told: str,
    *,
    disabled: bool | None = None,
    admin: bool | None = None,
) -> int:
    """As the page's People does (Database.change_person): the household's last admin is
    kept (exit 2)."""
    from app.store.errors import Conflict

    with household(settings) as database:
        person = database.user(name)
        if person is None:
            return no_user(name)
        try:
            database.change_person(person.id, disabled=disabled, admin=admin)
        except Conflict as exc:
            return refused(str(exc))
    print(told)
    return 0


def cmd_users_link(args: argparse.Namespace, settings: config.Settings) -> int:
    """As People → Sign-in link on the page: its digest keyed as the service keys its
    sessions, so the link works only for a service with the same settings."""
    from app.store.sessions import LINK_SECONDS, CookieDigest

    token = sessions_token(settings)
    if token is None:
        return refused(
            "the service has not made its access token yet (no AUTH_TOKEN): start it once, "
            "then ask for the link"
        )
    with household(settings) as database:
        person = database.user(args.name)
        if person is None:
            return no_user(args.name)
        if person.disabled:
            return refused(f"{args.name} is disabled: enable them first")
        link = CookieDigest(token).new_link()
        database.add_sign_in_link(person.id, link.key, link.expires)
    hours = LINK_SECONDS // 3600
    print(
        f"a sign-in link for {args.name}, once and within {hours} hours (an earlier one no "
        "longer works; their password does until it is used): the service's address "
        f"followed by\n{link.path}"
    )
    return 0


def sessions_token(settings: config.Settings) -> str | None:
    """What the service keys its sessions and links with: AUTH_TOKEN, or under Compose
    without one, the token serve made and keeps in DATA_DIR (app.cli.serve.compose_token);
    None when it has not made it yet."""
    from app.store.files import kept_token

    if settings.auth_token or not settings.published_on_loopback:
        return settings.auth_token
    return kept_token(settings.data_dir)


def cmd_users_passwd(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.store.errors import Refused
    from app.store.passwords import hash_password

    try:
        hashed = hash_password(read_password(ask=sys.stdin.isatty()))
    except Refused as exc:
        return refused(str(exc))
    with household(settings) as database:
        found = database.set_password(args.name, hashed)
    if not found:
        return no_user(args.name)
    print(f"set the password of {args.name}")
    return 0


def read_password(*, ask: bool) -> str:
    """Asked twice on a terminal (not echoed); else standard input's first line, without
    its line end (a script: `printf '%s\\n' "$PASSWORD" | python -m app users ...`)."""
    from app.store.errors import Refused

    if not ask:
        return sys.stdin.readline().removesuffix("\n").removesuffix("\r")
    password = getpass.getpass("New password: ")
    if getpass.getpass("Again: ") != password:
        raise Refused("the two passwords differ")
    return password


def cmd_users_remove(args: argparse.Namespace, settings: config.Settings) -> int:
    from app.search.cache import own_rows
    from app.store.errors import Conflict
    from app.store.files import forget_memory
    from app.store.search_cache import OwnCache

    with household(settings) as database:
        person = database.user(args.name)
        if person is None:
            return no_user(args.name)
        if not args.yes:
            mine = database.list(owner=person.id)
            print(
                f"This removes {person.name}, their {len(mine)} conversations, their memory.md "
                "and their searches in the cache, for good. Ask them to download their "
                "conversations first (Settings, Export my conversations).",
                file=sys.stderr,
            )
            print(f"Type {person.name} to remove them: ", end="", file=sys.stderr, flush=True)
            if sys.stdin.readline().removesuffix("\n").removesuffix("\r") != person.name:
                return refused("not removed: the name typed was not theirs")
        try:
            removed = database.remove_user(person.id, OwnCache(*own_rows(person.id)))
        except Conflict as exc:
            return refused(str(exc))
    forget_memory(settings.data_dir, person.id)
    print(f"removed {removed.name} and their {removed.conversations} conversations")
    return 0


def cmd_users_reset(args: argparse.Namespace, settings: config.Settings) -> int:
    with household(settings) as database:
        person = database.user(args.name)
        ended = None if person is None else database.reset_access(person.id)
    if ended is None:
        return no_user(args.name)
    print(
        f"ended {ended.sessions} sessions and revoked {ended.tokens} API tokens of "
        f"{args.name}: they sign in anew"
    )
    return 0
