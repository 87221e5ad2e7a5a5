"""A small inventory of stock items, with reorder suggestions."""
import json
from dataclasses import dataclass, field


@dataclass
class Item:
    sku: str
    name: str
    quantity: int = 0
    reorder_level: int = 5
    tags: list = field(default_factory=list)


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, item):
        if item.sku in self.items:
            raise ValueError("duplicate sku: " + item.sku)
        self.items[item.sku] = item

    def remove(self, sku, count):
        item = self.items[sku]
        if count > item.quantity:
            raise ValueError("not enough " + item.name)
        item.quantity -= count
        return item.quantity

    def restock(self, sku, count):
        self.items[sku].quantity += count

    def low_stock(self):
        result = []
        for sku in self.items:
            item = self.items[sku]
            if item.quantity <= item.reorder_level:
                result.append(item)
        return result

    def to_json(self):
        return json.dumps([item.__dict__ for item in self.items.values()], indent=2)
