"""Stock items: a base class and the kinds of goods a small shop keeps."""

from __future__ import annotations

TAX_RATE = 0.2
ECO_FEE = 1.5
MAX_NAME_LENGTH = 40
DISCOUNT_WINDOW = 3
NEAR_EXPIRY_DISCOUNT = 0.5
BUNDLE_DISCOUNT = 0.1


class Item:
    """One line of stock: a SKU, a name, a unit price and how many are on the shelf."""

    category = "general"

    def __init__(self, sku: str, name: str, unit_price: float, quantity: int = 0) -> None:
        if unit_price < 0:
            raise ValueError(f"unit price must not be negative: {unit_price}")
        if quantity < 0:
            raise ValueError(f"quantity must not be negative: {quantity}")
        self.sku = sku
        self.name = name.strip()[:MAX_NAME_LENGTH]
        self.unit_price = unit_price
        self.quantity = quantity

    def price_with_tax(self) -> float:
        """The shelf price of one unit, tax included."""
        return round(self.unit_price * (1 + TAX_RATE), 2)

    def value(self, day: int = 0) -> float:
        """What the whole line is worth on ``day`` at cost price."""
        return round(self.unit_price * self.quantity, 2)

    def is_available(self, day: int = 0) -> bool:
        return self.quantity > 0

    def restock(self, amount: int) -> Item:
        if amount <= 0:
            raise ValueError(f"restock amount must be positive: {amount}")
        self.quantity += amount
        return self

    def take(self, amount: int) -> Item:
        if amount <= 0:
            raise ValueError(f"amount to take must be positive: {amount}")
        if amount > self.quantity:
            raise ValueError(f"only {self.quantity} of {self.sku} left, asked for {amount}")
        self.quantity -= amount
        return self

    def describe(self) -> str:
        return f"{self.sku} {self.name} x{self.quantity} @ {self.unit_price:.2f}"

    def __repr__(self) -> str:
        kind = type(self).__name__
        return f"{kind}({self.sku!r}, {self.name!r}, {self.unit_price}, {self.quantity})"


class Perishable(Item):
    """Food and the like: worth less close to its best-before day, nothing after it."""

    category = "food"

    def __init__(
        self, sku: str, name: str, unit_price: float, quantity: int = 0, *, expires_on: int
    ) -> None:
        super().__init__(sku, name, unit_price, quantity)
        self.expires_on = expires_on

    def is_expired(self, day: int) -> bool:
        return day >= self.expires_on

    def is_available(self, day: int = 0) -> bool:
        return super().is_available(day) and not self.is_expired(day)

    def value(self, day: int = 0) -> float:
        if self.is_expired(day):
            return 0.0
        full = super().value(day)
        if self.expires_on - day <= DISCOUNT_WINDOW:
            return round(full * (1 - NEAR_EXPIRY_DISCOUNT), 2)
        return full

    def describe(self) -> str:
        return f"{super().describe()} (best before day {self.expires_on})"


class Electronic(Item):
    """Devices: an eco fee is charged on top of the price, and they carry a warranty."""

    category = "electronics"

    def __init__(
        self,
        sku: str,
        name: str,
        unit_price: float,
        quantity: int = 0,
        *,
        warranty_months: int = 12,
    ) -> None:
        super().__init__(sku, name, unit_price, quantity)
        if warranty_months < 0:
            raise ValueError(f"warranty must not be negative: {warranty_months}")
        self.warranty_months = warranty_months

    def price_with_tax(self) -> float:
        return round((self.unit_price + ECO_FEE) * (1 + TAX_RATE), 2)

    def warranty_years(self) -> float:
        return self.warranty_months / 12

    def describe(self) -> str:
        years = self.warranty_years()
        label = "year" if years == 1 else "years"
        return f"{super().describe()} [{years:g} {label} warranty]"


class Bundle(Item):
    """Several items sold together at a discount; available only while every part is."""

    category = "bundle"

    def __init__(self, sku: str, name: str, parts: list[Item], quantity: int = 0) -> None:
        if not parts:
            raise ValueError("a bundle needs at least one part")
        price = sum(part.unit_price for part in parts) * (1 - BUNDLE_DISCOUNT)
        super().__init__(sku, name, round(price, 2), quantity)
        self.parts = list(parts)

    def is_available(self, day: int = 0) -> bool:
        if not super().is_available(day):
            return False
        missing = 0
        for part in self.parts:
            if not part.is_available(day):
                missing += 1
        return missing == 0

    def describe(self) -> str:
        names = ", ".join(part.name for part in self.parts)
        return f"{super().describe()} = {names}"
