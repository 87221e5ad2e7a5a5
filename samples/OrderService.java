package shop.orders;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Keeps orders in memory and computes their totals. */
public class OrderService {
    private final Map<String, Order> orders = new HashMap<>();
    private final double taxRate;

    public OrderService(double taxRate) {
        this.taxRate = taxRate;
    }

    public Order create(String id, String customer) {
        if (orders.containsKey(id)) {
            throw new IllegalArgumentException("order exists: " + id);
        }
        Order order = new Order(id, customer);
        orders.put(id, order);
        return order;
    }

    public double total(String id) {
        Order order = orders.get(id);
        double sum = 0;
        for (Line line : order.lines) {
            sum = sum + line.price * line.quantity;
        }
        return sum + sum * taxRate;
    }

    public List<Order> byCustomer(String customer) {
        List<Order> result = new ArrayList<>();
        for (Order order : orders.values()) {
            if (order.customer.equals(customer)) {
                result.add(order);
            }
        }
        return result;
    }

    static class Order {
        final String id;
        final String customer;
        final List<Line> lines = new ArrayList<>();

        Order(String id, String customer) {
            this.id = id;
            this.customer = customer;
        }

        void add(String sku, double price, int quantity) {
            lines.add(new Line(sku, price, quantity));
        }
    }

    record Line(String sku, double price, int quantity) {}
}
