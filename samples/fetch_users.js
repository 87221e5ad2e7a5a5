// Loads users from the API and keeps only the active ones.
const API_URL = "https://example.com/api";

function fetchUsers(page) {
  return fetch(API_URL + "/users?page=" + page)
    .then(function (response) {
      if (!response.ok) {
        throw new Error("request failed: " + response.status);
      }
      return response.json();
    })
    .then(function (body) {
      return body.users.filter(function (user) {
        return user.active;
      });
    });
}

function fetchAllUsers(pages) {
  var requests = [];
  for (var i = 1; i <= pages; i++) {
    requests.push(fetchUsers(i));
  }
  return Promise.all(requests).then(function (lists) {
    return lists.flat();
  });
}

module.exports = { fetchUsers, fetchAllUsers };
