// Shopping cart state for the checkout page.
export interface CartItem {
  sku: string;
  name: string;
  price: number;
  quantity: number;
}

export type Discount = { code: string; percent: number };

export const formatPrice = (cents: number): string => {
  return "$" + (cents / 100).toFixed(2);
};

export class Cart {
  private items: CartItem[] = [];
  private discount: Discount | null = null;

  add(item: CartItem): void {
    const existing = this.items.find((i) => i.sku === item.sku);
    if (existing) {
      existing.quantity += item.quantity;
    } else {
      this.items.push({ ...item });
    }
  }

  remove(sku: string): void {
    this.items = this.items.filter((i) => i.sku !== sku);
  }

  applyDiscount(discount: Discount): void {
    if (discount.percent <= 0 || discount.percent > 100) {
      throw new Error("bad discount: " + discount.code);
    }
    this.discount = discount;
  }

  total(): number {
    let sum = 0;
    for (const item of this.items) {
      sum += item.price * item.quantity;
    }
    if (this.discount) {
      sum = sum - (sum * this.discount.percent) / 100;
    }
    return Math.round(sum);
  }
}

export function summarize(cart: Cart): string {
  return "Total: " + formatPrice(cart.total());
}
