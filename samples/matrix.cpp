// A small dense matrix for the physics demo.
#include <stdexcept>
#include <vector>

class Matrix {
public:
    Matrix(int rows, int cols) : rows_(rows), cols_(cols), data_(rows * cols, 0.0) {}

    double at(int r, int c) const { return data_[r * cols_ + c]; }

    void set(int r, int c, double value) {
        data_[r * cols_ + c] = value;
    }

    Matrix multiply(const Matrix &other) const;

    int rows() const { return rows_; }
    int cols() const { return cols_; }

private:
    int rows_;
    int cols_;
    std::vector<double> data_;
};

Matrix Matrix::multiply(const Matrix &other) const {
    if (cols_ != other.rows_) {
        throw std::invalid_argument("shape mismatch");
    }
    Matrix result(rows_, other.cols_);
    for (int i = 0; i < rows_; i++) {
        for (int j = 0; j < other.cols_; j++) {
            double sum = 0;
            for (int k = 0; k < cols_; k++) {
                sum += at(i, k) * other.at(k, j);
            }
            result.set(i, j, sum);
        }
    }
    return result;
}

template <typename T>
T clamp(T value, T low, T high) {
    return value < low ? low : (value > high ? high : value);
}

Matrix identity(int n) {
    Matrix m(n, n);
    for (int i = 0; i < n; i++) {
        m.set(i, i, 1.0);
    }
    return m;
}
