"""Nightly sales report: reads orders, prints totals per region."""
import csv
import functools
import sys


def cached(function):
    """Remember results by arguments."""
    results = {}

    @functools.wraps(function)
    def wrapper(*args):
        if args not in results:
            results[args] = function(*args)
        return results[args]

    return wrapper


@cached
def region_of(country):
    regions = {"DE": "EU", "FR": "EU", "US": "NA", "CA": "NA"}
    return regions.get(country, "other")


def load_orders(path):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    print("loaded", len(rows), "orders from", path)
    return rows


class Report:
    def __init__(self, orders):
        self.orders = orders
        self.totals = {}

    def compute(self):
        for order in self.orders:
            region = region_of(order["country"])
            self.totals[region] = self.totals.get(region, 0) + float(order["amount"])
        print("computed totals for", len(self.totals), "regions")

    def show(self, out=sys.stdout):
        for region in sorted(self.totals):
            print(f"{region:8} {self.totals[region]:12.2f}", file=out)


def main(argv):
    if len(argv) != 2:
        print("usage: report.py ORDERS.csv")
        return 2
    report = Report(load_orders(argv[1]))
    report.compute()
    report.show()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
