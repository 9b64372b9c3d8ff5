"""An airline desk as an environment: bookings as slots, the refund policy as constraints.

Shared by the environment tests (and a realistic scenario for docs/environment.md):
a small backend holds users, bookings and the refunds it actually paid (the side effect
the tests count); the environment shows the bookings as a slot, states the refund policy
as constraints, and offers two business actions — ``verify_identity`` (a pre-check
against the backend) and ``refund`` (locked until the identity is verified, pre-checked,
validated against the policy, and paid only after everything validated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxline.environment import ActionSpec, Check, Constraint, Environment, EnvState, SlotSpec, Tx
from ctxline.record.events import JsonValue
from ctxline.record.jsonvalue import JsonObject, as_int, as_object, as_str, dig
from json_reads_a import objects

__all__ = [
    "BOOKINGS",
    "IDENTITY",
    "NOW",
    "POLICY",
    "REFUND_ONCE",
    "REFUND_POLICY",
    "Backend",
    "booking",
    "load_bookings",
    "make_env",
]

NOW = datetime(2024, 5, 15, 15, 0, tzinfo=UTC)
WINDOW = timedelta(hours=24)

BOOKING: dict[str, JsonValue] = {
    "type": "object",
    "required": ["user", "cabin", "booked_at", "insurance", "status", "amount"],
    "additionalProperties": False,
    "properties": {
        "user": {"type": "string"},
        "cabin": {"enum": ["basic_economy", "economy", "business"]},
        "booked_at": {"type": "string"},
        "insurance": {"type": "boolean"},
        "status": {"enum": ["confirmed", "refunded"]},
        "amount": {"type": "integer", "minimum": 0},
        "refunded_at": {"type": "string"},
    },
}
BOOKINGS: dict[str, JsonValue] = {"type": "object", "additionalProperties": BOOKING}
REFUNDS: dict[str, JsonValue] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["booking", "amount"],
        "properties": {"booking": {"type": "string"}, "amount": {"type": "integer", "minimum": 0}},
    },
}


@dataclass
class Backend:
    """The airline's systems: what the environment mirrors, and the payments it makes."""

    users: dict[str, str] = field(default_factory=lambda: {"mia_li_3668": "1990-04-05"})
    bookings: dict[str, JsonObject] = field(default_factory=dict)
    paid: list[tuple[str, int]] = field(default_factory=list)
    """Refunds actually paid (the side effect a pre-check must prevent)."""

    def __post_init__(self) -> None:
        if not self.bookings:
            self.bookings = {
                "NEW222": booking("mia_li_3668", "economy", NOW - timedelta(hours=6), False, 240),
                "OLD111": booking("mia_li_3668", "economy", NOW - timedelta(days=14), False, 180),
                "INS333": booking("mia_li_3668", "economy", NOW - timedelta(days=9), True, 310),
                "BIZ444": booking("mia_li_3668", "business", NOW - timedelta(days=30), False, 900),
                "EVE555": booking("eve_7", "economy", NOW - timedelta(hours=1), False, 99),
            }

    def pay_refund(self, booking_id: str, amount: int) -> str:
        self.paid.append((booking_id, amount))
        return f"refund of ${amount} for {booking_id} sent to the original payment method"


def booking(user: str, cabin: str, at: datetime, insurance: bool, amount: int) -> JsonObject:
    return {
        "user": user,
        "cabin": cabin,
        "booked_at": at.isoformat(),
        "insurance": insurance,
        "status": "confirmed",
        "amount": amount,
    }


POLICY = (
    Constraint(
        "refund-window",
        "A booking may be refunded within 24 hours of booking; later only with travel insurance "
        "or in the business cabin.",
        ("booking",),
    ),
    Constraint(
        "identity", "Verify the user's identity before changing any booking.", ("booking", "user")
    ),
)


def _bookings(value: JsonValue) -> dict[str, JsonObject]:
    """The ``bookings`` slot's value, each booking an object (an unset slot has none)."""
    return {k: as_object(b, f"bookings[{k!r}]") for k, b in as_object(value or {}, "bookings").items()}


def _refund_policy(state: EnvState, args: Mapping[str, JsonValue]) -> str | None:
    for ident, b in _bookings(state["bookings"]).items():
        if b["status"] != "refunded":
            continue
        age = datetime.fromisoformat(as_str(b["refunded_at"])) - datetime.fromisoformat(
            as_str(b["booked_at"])
        )
        if age > WINDOW and not b["insurance"] and b["cabin"] != "business":
            days = age.days
            return f"booking {ident} was made {days} days before the refund, without insurance, in {b['cabin']}"
    return None


def _refund_once(state: EnvState, args: Mapping[str, JsonValue]) -> str | None:
    seen: set[str] = set()
    for r in objects(state["refunds"] or [], "refunds"):
        if r["booking"] in seen:
            return f"booking {r['booking']} would be refunded twice"
        seen.add(as_str(r["booking"]))
    return None


REFUND_POLICY = Check(
    "refund-policy",
    _refund_policy,
    "refund only within 24 hours of booking, or with travel insurance, or in business; otherwise"
    " offer a travel certificate or transfer the user to a human agent",
)
REFUND_ONCE = Check("refund-once", _refund_once, "refund each booking at most once")


def _verified(state: EnvState, args: Mapping[str, JsonValue]) -> str | None:
    return None if state["session_user"] else "no user is verified"


IDENTITY = Check(
    "identity-verified", _verified, "the user's identity is verified (verify_identity)"
)


def make_env(backend: Backend, **kwargs: Any) -> Environment:
    def verify_check(args: Mapping[str, JsonValue], state: EnvState) -> Iterable[str]:
        user_id = args["user_id"]
        dob = backend.users.get(user_id) if isinstance(user_id, str) else None
        if dob is None:
            yield f"there is no user {args['user_id']!r}"
        elif dob != args["date_of_birth"]:
            yield "the date of birth does not match the user's profile"

    def verify(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        tx.set("session_user", args["user_id"])
        return f"Identity verified: {args['user_id']}."

    def refund_check(args: Mapping[str, JsonValue], state: EnvState) -> Iterable[str]:
        booking_id = args["booking_id"]
        found = _bookings(state["bookings"]).get(booking_id) if isinstance(booking_id, str) else None
        if found is None:
            mine = sorted(
                k
                for k, b in _bookings(state["bookings"]).items()
                if b["user"] == state["session_user"]
            )
            yield f"there is no booking {args['booking_id']!r}; the user's bookings are {', '.join(mine)}"
        elif found["user"] != state["session_user"]:
            yield f"booking {args['booking_id']} belongs to another user"
        elif found["status"] == "refunded":
            yield f"booking {args['booking_id']} was refunded already"

    def refund(tx: Tx, args: Mapping[str, JsonValue]) -> str:
        booking_id = as_str(args["booking_id"], "booking_id")
        bookings = dict(as_object(tx.get("bookings") or {}, "bookings"))
        b = dict(as_object(bookings[booking_id], f"bookings[{booking_id!r}]"))
        b.update(status="refunded", refunded_at=tx.now.isoformat())
        bookings[booking_id] = b
        tx.set("bookings", bookings)
        tx.append("refunds", {"booking": args["booking_id"], "amount": b["amount"]})
        return f"Booking {args['booking_id']} is refunded (${b['amount']})."

    def pay(args: Mapping[str, JsonValue], state: EnvState) -> str:
        booking_id = as_str(args["booking_id"], "booking_id")
        amount = as_int(dig(state["bookings"], booking_id, "amount"), "amount")
        return backend.pay_refund(booking_id, amount)

    verify_action = ActionSpec(
        "verify_identity",
        "Check the user's identity against their profile.",
        verify,
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["user_id", "date_of_birth"],
            "properties": {"user_id": {"type": "string"}, "date_of_birth": {"type": "string"}},
        },
        when="the user gave their user id and date of birth",
        when_not="the user is verified already",
        affects=("session_user",),
        entities={"user_id": "user"},
        precheck=verify_check,
    )
    refund_action = ActionSpec(
        "refund",
        "Refund a booking to its original payment method.",
        refund,
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["booking_id"],
            "properties": {"booking_id": {"type": "string"}, "reason": {"type": "string"}},
        },
        when="the user asked for a refund of one of their bookings",
        when_not="the user only asks whether a refund is possible",
        affects=("bookings", "refunds"),
        entities={"booking_id": "booking"},
        precheck=refund_check,
        unlock=IDENTITY,
        perform=pay,
    )
    slots = [
        SlotSpec("session_user", {"type": "string"}, description="the verified user"),
        SlotSpec("bookings", BOOKINGS, default={}, description="the user's bookings", max_chars=2_000),
        SlotSpec("refunds", REFUNDS, policy="append", default=[], tier="on-demand",
                 description="the refunds made in this session"),
    ]  # fmt: skip
    options: dict[str, Any] = {
        "builtins": ("update_goal", "add_constraint", "remove_constraint", "read_slot"),
        "constraints": POLICY,
        "clock": lambda: NOW,
        **kwargs,
    }
    return Environment(
        slots, [verify_action, refund_action], [REFUND_POLICY, REFUND_ONCE], **options
    )


def load_bookings(backend: Backend, user: str) -> dict[str, JsonValue]:
    """The user's bookings as the app mirrors them into the ``bookings`` slot."""
    return {k: dict(v) for k, v in backend.bookings.items() if v["user"] == user}
